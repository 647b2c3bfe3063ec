package parent_test

import (
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/internal/testkit"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spawnUnderProbe spawns a parent actor under a stand-in for the registry
// that hands every Idle to idle.
func spawnUnderProbe(t *testing.T, sys *actor.ActorSystem, idle chan<- int64) *actor.PID {
	pid, _ := spawnListening(t, sys, idle)
	return pid
}

// spawnListening is spawnUnderProbe that also returns the listener count
// the parent actor keeps.
func spawnListening(t *testing.T, sys *actor.ActorSystem, idle chan<- int64) (*actor.PID, *atomic.Int32) {
	listening := new(atomic.Int32)
	pids := make(chan *actor.PID, 1)
	probe := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			pids <- c.Spawn(parent.Props(slog.Default(), "agent", listening))
		case *local.Idle:
			idle <- m.Uses
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(probe).Wait() })
	return testkit.Recv(t, pids, "the parent actor"), listening
}

func subscribe(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) (*fanout.Sub, chan subagent.Event) {
	got := make(chan subagent.Event, 16)
	sub := fanout.NewSub(func(ev subagent.Event) error { got <- ev; return nil }, slog.Default(), 0, nil)
	sys.Root.Send(pid, &local.Subscribe{Sub: sub})
	return sub, got
}

// Contracts E1, E2, E6: progress that arrives before Published is held,
// so a run's events are start, progress, end; a discarded start's
// progress never reaches a listener.
func TestE1E6_StartProgressEndAndIdleOnceNothingIsLeft(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	raw := sys.ActorSystem()
	idle := make(chan int64, 4)
	pid, listening := spawnListening(t, raw, idle)
	sub, got := subscribe(t, raw, pid)
	step := subagent.RunProgress{RunID: "r1", Kind: subagent.ModelCallStarted, Step: 1}
	raw.Root.Send(pid, &local.Expect{RunID: "r1"})
	raw.Root.Send(pid, &local.Expect{RunID: "gone"})
	raw.Root.Send(pid, &local.Progress{Event: step})
	raw.Root.Send(pid, &local.Progress{Event: subagent.RunProgress{RunID: "gone", Kind: subagent.ModelCallStarted}})
	raw.Root.Send(pid, &local.Discarded{RunID: "gone"})
	raw.Root.Send(pid, &local.Published{RunID: "r1", Provider: "p", SessionID: "c1", Local: true})
	raw.Root.Send(pid, &local.Settled{RunID: "r1", Result: subagent.Result{
		Output: []subagent.ContentBlock{subagent.Text("hi")}, StopReason: subagent.Completed}})
	raw.Root.Send(pid, &local.Progress{Event: subagent.RunProgress{RunID: "r1", Kind: subagent.MessageText}})
	want := []subagent.Event{
		subagent.RunStarted{RunID: "r1", Provider: "p", SessionID: "c1", Local: true},
		step,
		subagent.RunEnded{RunID: "r1", Provider: "p", SessionID: "c1", Local: true, StopReason: subagent.Completed, LastAssistantMessage: "hi",
			Result: subagent.Result{Output: []subagent.ContentBlock{subagent.Text("hi")}, StopReason: subagent.Completed}},
	}
	for i, w := range want {
		if ev := testkit.Recv(t, got, "event "+subagent.TypeOf(w)); !reflect.DeepEqual(ev, w) {
			t.Fatalf("event %d: %#v, want %#v", i, ev, w)
		}
	}
	if n := listening.Load(); n != 1 {
		t.Fatalf("listener count %d with one listener", n)
	}
	// With a listener still subscribed the actor is not idle; once it is
	// gone it reports the references it used: one publication, one
	// discard, one subscription.
	sub.Release()
	raw.Root.Send(pid, &fanout.Unsubscribe{Sub: sub})
	if uses := testkit.Recv(t, idle, "the parent to report idle"); uses != 3 {
		t.Fatalf("idle after %d uses, want 3", uses)
	}
	if n := listening.Load(); n != 0 {
		t.Fatalf("listener count %d after the listener left", n)
	}
	select {
	case ev := <-got:
		t.Fatalf("event after the end or from a discarded run: %#v", ev)
	default:
	}
}
