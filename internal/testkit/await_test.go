package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envShow) != "" {
		// The re-executed binary: say what the deadline came to.
		fmt.Printf("deadline=%s scaled=%s\n", Deadline, Scale(time.Second))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// envShow makes the test binary print its deadlines instead of testing.
const envShow = "AWAIT_TEST_SHOW_DEADLINE"

// show runs the test binary with the scale set to value and returns what
// it printed and how it exited.
func show(t *testing.T, value string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(Ctx(t), os.Args[0], "-test.run=^$")
	// A race-enabled binary would sleep a second before it exits.
	cmd.Env = append(os.Environ(), envShow+"=1", EnvScale+"="+value, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Contract K3 (the suite under load): one environment variable stretches
// every test deadline and every time limit a test scales, so that a loaded
// machine runs the same tests with more time.
func TestK3_DeadlineScalesByEnvironment(t *testing.T) {
	for value, want := range map[string]string{
		"3":   "deadline=1m0s scaled=3s",
		"0.5": "deadline=10s scaled=500ms",
		"":    "deadline=20s scaled=1s",
	} {
		out, err := show(t, value)
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("%s=%q: %q, %v; want %q", EnvScale, value, out, err, want)
		}
	}
}

// Contract K3: a scale that is no positive number stops the tests at once,
// naming the variable, instead of every wait guessing.
func TestK3_InvalidDeadlineScaleFailsClearly(t *testing.T) {
	for _, value := range []string{"0", "-2", "fast", "NaN", "+Inf", "1e30", " 3"} {
		if _, err := parseScale(value); err == nil || !strings.Contains(err.Error(), EnvScale) {
			t.Errorf("parseScale(%q): %v; want an error naming %s", value, err, EnvScale)
		}
		out, err := show(t, value)
		if err == nil || !strings.Contains(out, EnvScale+"=") || !strings.Contains(out, "is not a positive number") {
			t.Errorf("test binary with %s=%q: %v, output %q", EnvScale, value, err, out)
		}
	}
}

// Ctx ends with the (scaled) deadline, and with the test.
func TestCtxHasTheDeadline(t *testing.T) {
	ctx := Ctx(t)
	dl, ok := ctx.Deadline()
	if left := time.Until(dl); !ok || left > Deadline {
		t.Fatalf("deadline in %s, want about %s", left, Deadline)
	}
	if ctx.Err() != nil || context.Cause(ctx) != nil {
		t.Fatal("a fresh context has ended")
	}
}
