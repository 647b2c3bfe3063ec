package reply

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type cmd struct{ To }

func TestAnsweredBeforeWaitNeedsNoChannel(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		c := &cmd{}
		c.Answer(c) // a pointer: boxing it allocates nothing
		v, err := c.Wait(context.Background(), nil)
		if err != nil || v != c {
			t.Fatalf("got %v, %v", v, err)
		}
	})
	if allocs > 1 { // the command itself
		t.Fatalf("%v allocations; an answer found at once must not make a channel", allocs)
	}
}

// waitingNow returns once a waiter waits on c's channel.
func waitingNow(t *testing.T, c *cmd) {
	deadline := time.Now().Add(testkit.Deadline)
	for c.state.Load() != waiting {
		if time.Now().After(deadline) {
			t.Error("the waiter never waited")
			return
		}
		runtime.Gosched()
	}
}

func TestAnswerReachesAWaiter(t *testing.T) {
	c := &cmd{}
	go func() {
		waitingNow(t, c) // answer only once the waiter waits
		c.Answer("late")
	}()
	v, err := c.Wait(context.Background(), nil)
	if err != nil || v != "late" {
		t.Fatalf("got %v, %v", v, err)
	}
}

func TestOnlyTheFirstAnswerCounts(t *testing.T) {
	for _, waitFirst := range []bool{false, true} {
		c := &cmd{}
		done := make(chan any)
		if waitFirst {
			go func() { v, _ := c.Wait(context.Background(), nil); done <- v }()
			waitingNow(t, c)
		}
		c.Answer("first")
		c.Answer("second") // must neither block nor replace the first
		c.Fail(errors.New("third"))
		var v any
		if waitFirst {
			v = <-done
		} else {
			v, _ = c.Wait(context.Background(), nil)
		}
		if v != "first" {
			t.Fatalf("waitFirst=%v: got %v, want the first answer", waitFirst, v)
		}
	}
}

func TestFailIsWaitsError(t *testing.T) {
	boom := errors.New("boom")
	c := &cmd{}
	c.Fail(boom)
	if _, err := c.Wait(context.Background(), nil); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

func TestGoneWithoutAnswer(t *testing.T) {
	gone := make(chan struct{})
	close(gone)
	c := &cmd{}
	if _, err := c.Wait(context.Background(), gone); !errors.Is(err, ErrGone) {
		t.Fatalf("err %v, want ErrGone", err)
	}
}

func TestWaitAgainAfterContextEnded(t *testing.T) {
	c := &cmd{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	c.Answer("after")
	ctx, cancel = context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	if v, err := c.Wait(ctx, nil); err != nil || v != "after" {
		t.Fatalf("second wait: %v, %v; want the answer given after the first gave up", v, err)
	}
}
