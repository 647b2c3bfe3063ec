package testkit

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"
)

// EnvScale names the environment variable that multiplies every test
// deadline (Deadline and whatever Scale is given): a positive number, 1
// when unset. A loaded machine sets it above 1 so that slow is not
// mistaken for broken.
const EnvScale = "SUBACTOR_TEST_DEADLINE_SCALE"

// baseDeadline is Deadline on an unloaded machine.
const baseDeadline = 20 * time.Second

// scale is EnvScale's factor; an invalid value stops the test binary at
// once, naming the variable, rather than letting every wait guess.
var scale = func() float64 {
	f, err := parseScale(os.Getenv(EnvScale))
	if err != nil {
		panic(err)
	}
	return f
}()

// parseScale reads EnvScale's value: "" is 1, anything else must be a
// finite number above 0.
func parseScale(v string) (float64, error) {
	if v == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	// NaN fails every comparison; the upper bound keeps a scaled
	// deadline within time.Duration.
	if err != nil || !(f > 0 && f*float64(baseDeadline) < math.MaxInt64/2) {
		return 0, fmt.Errorf("await: %s=%q is not a positive number (a factor for every test deadline, 1 by default)", EnvScale, v)
	}
	return f, nil
}

// Scale is d times EnvScale's factor: a test's own time limit (an agent's
// start limit, a window that must pass) that a loaded machine stretches
// like the deadline.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }

// Deadline bounds every wait, scaled by EnvScale. It is generous: it only
// decides how long a broken test takes to fail, never whether a working
// one passes.
var Deadline = Scale(baseDeadline)

// Recv returns the next value from ch, or fails the test naming what it
// waited for.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Deadline)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %s for %s", Deadline, what)
		panic("unreachable")
	}
}

// Ctx is a context that ends at the deadline, for calls that take one.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Deadline)
	t.Cleanup(cancel)
	return ctx
}
