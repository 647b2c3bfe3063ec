package parent_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spawnUnderProbe spawns a parent actor under a stand-in for the registry
// that hands every ParentIdle to idle.
func spawnUnderProbe(t *testing.T, sys *actor.ActorSystem, idle chan<- int64) *actor.PID {
	pids := make(chan *actor.PID, 1)
	probe := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			pids <- c.Spawn(parent.Props(slog.Default(), "agent"))
		case *messages.ParentIdle:
			idle <- m.Uses
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(probe).Wait() })
	return <-pids
}

// Contracts E1, E2.
func TestE1_StartThenEndAndIdleOnceNothingIsLeft(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	raw := sys.ActorSystem()
	idle := make(chan int64, 4)
	pid := spawnUnderProbe(t, raw, idle)
	got := make(chan subagent.Event, 4)
	sub := &parent.Subscribe{To: reply.New(), Listener: func(ev subagent.Event) error {
		got <- ev
		return nil
	}}
	raw.Root.Send(pid, sub)
	r, err := sub.Wait(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listener := r.(*actor.PID)
	raw.Root.Send(pid, &messages.Published{RunId: "r1", Provider: "p", Id: "c1", Local: true})
	raw.Root.Send(pid, &messages.Settled{RunId: "r1", Result: messages.FromResult(subagent.Result{
		Output: []subagent.ContentBlock{subagent.Text("hi")}, StopReason: subagent.Completed})})
	if ev := <-got; ev != (subagent.RunStarted{RunID: "r1", Provider: "p", ID: "c1", Local: true}) {
		t.Fatalf("first event %#v", ev)
	}
	want := subagent.RunEnded{RunID: "r1", Provider: "p", ID: "c1", Local: true, StopReason: subagent.Completed, LastAssistantMessage: "hi"}
	if ev := <-got; ev != want {
		t.Fatalf("second event %#v", ev)
	}
	// With a listener still subscribed the actor is not idle; once it is
	// removed and drained, it reports both references it used.
	unsub := &parent.Unsubscribe{To: reply.New(), ID: listener.Id}
	raw.Root.Send(pid, unsub)
	if _, err := unsub.Wait(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	drain := &fanout.Drain{To: reply.New()}
	raw.Root.Send(listener, drain)
	if _, err := drain.Wait(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if uses := <-idle; uses != 2 {
		t.Fatalf("idle after %d uses, want 2", uses)
	}
	select {
	case uses := <-idle:
		t.Fatalf("idle reported early, with %d uses", uses)
	default:
	}
}
