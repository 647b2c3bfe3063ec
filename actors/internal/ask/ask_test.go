package ask_test

import (
	"context"
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.DeadLetters)
}

func TestAskGetsTheReplyOrLearnsTheTargetIsGone(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	echo := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond("re: " + s)
		}
	}))
	call := ask.Send(sys, echo, "hi")
	defer call.Close()
	if r, err := call.Wait(testkit.Ctx(t), nil); err != nil || r != "re: hi" {
		t.Fatalf("reply = %v, %v", r, err)
	}
	if err := sys.Root.StopFuture(echo).Wait(); err != nil {
		t.Fatal(err)
	}
	// The same address serves the next request.
	call.Send(echo, "hi")
	if _, err := call.Wait(testkit.Ctx(t), nil); !errors.Is(err, ask.ErrGone) {
		t.Fatalf("request to a stopped actor: %v", err)
	}
}

func TestWaitEndsWithTheContextOrTheGoneSignal(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	silent := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer sys.Root.Stop(silent)

	call := ask.Send(sys, silent, "hello?")
	defer call.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := call.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended context: %v", err)
	}
	gone := make(chan struct{})
	close(gone)
	if _, err := call.Wait(testkit.Ctx(t), gone); !errors.Is(err, ask.ErrGone) {
		t.Fatalf("Wait after gone: %v", err)
	}
}

func TestADeadLetterIsGoneEvenWhenTheGoneSignalWins(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	dead := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := sys.Root.StopFuture(dead).Wait(); err != nil {
		t.Fatal(err)
	}
	call := ask.Send(sys, dead, "anyone?")
	defer call.Close()
	// Wait for the dead letter's answer first, then let gone win the select.
	if _, err := call.Wait(testkit.Ctx(t), nil); !errors.Is(err, ask.ErrGone) {
		t.Fatalf("first wait: %v", err)
	}
	again := ask.Send(sys, dead, "anyone?")
	defer again.Close()
	gone := make(chan struct{})
	close(gone)
	ctx := testkit.Ctx(t)
	for range 100 {
		if r, err := again.Wait(ctx, gone); !errors.Is(err, ask.ErrGone) || r != nil {
			t.Fatalf("wait with gone closed: %v, %v", r, err)
		}
	}
}
