// Package await is how tests wait: every wait has a deadline and fails the
// test by name, so a regression never shows up only as a package timeout.
package await

import (
	"context"
	"testing"
	"time"
)

// Deadline bounds every wait. It is generous: it only decides how long a
// broken test takes to fail, never whether a working one passes.
const Deadline = 20 * time.Second

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
