package parent_test

import (
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Contracts A3, E1, E6: a subscriber actor is sent a run's start, its
// held progress and its end as protobuf messages, in that order; once it
// stops, the parent actor drops it, tells the registry (Dropped) and,
// with nothing left, reports idle after it.
func TestA3E1E6_ASubscriberActorGetsTheRunByMessageAndIsDroppedWhenItStops(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	raw := sys.ActorSystem()
	told := make(chan any, 4) // what the parent actor tells the registry
	pids := make(chan *actor.PID, 1)
	listening := new(atomic.Int32)
	probe := raw.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			pids <- c.Spawn(parent.Props(slog.Default(), "agent", listening))
		case *local.Dropped, *local.Idle:
			told <- m
		}
	}))
	defer func() { _ = raw.Root.StopFuture(probe).Wait() }()
	pid := testkit.Recv(t, pids, "the parent actor")

	got := make(chan proto.Message, 8)
	follower := raw.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(proto.Message); ok {
			if _, touch := m.(*actor.Touch); !touch {
				got <- m
			}
		}
	}))
	raw.Root.Send(pid, &local.Subscribe{Sub: fanout.NewSubTo(follower, slog.Default(), nil)})
	raw.Root.Send(pid, &local.Expect{RunID: "r1"})
	raw.Root.Send(pid, &local.Progress{Event: subagent.RunProgress{RunID: "r1", Kind: subagent.ModelCallStarted, Step: 1}})
	raw.Root.Send(pid, &local.Published{RunID: "r1", Provider: "p", SessionID: "c1", Local: true})
	raw.Root.Send(pid, &local.Settled{RunID: "r1", Result: subagent.Result{
		Output: []subagent.ContentBlock{subagent.Text("hi")}, StopReason: subagent.Completed}})
	if m, ok := testkit.Recv(t, got, "the start message").(*messages.RunStarted); !ok || m.GetRunId() != "r1" || !m.GetLocal() {
		t.Fatalf("first message %v, want r1's start", m)
	}
	if m, ok := testkit.Recv(t, got, "the progress message").(*messages.RunProgress); !ok || m.GetKind() != string(subagent.ModelCallStarted) {
		t.Fatalf("second message %v, want r1's progress", m)
	}
	if m, ok := testkit.Recv(t, got, "the end message").(*messages.RunEnded); !ok || m.GetLastAssistantMessage() != "hi" || m.GetStopReason() != "completed" {
		t.Fatalf("third message %v, want r1's end", m)
	}
	if n := listening.Load(); n != 1 {
		t.Fatalf("listener count %d with one subscriber actor", n)
	}

	if err := raw.Root.StopFuture(follower).Wait(); err != nil {
		t.Fatal(err)
	}
	if m, ok := testkit.Recv(t, told, "the registry told of the dropped subscriber").(*local.Dropped); !ok || m.ParentID != "agent" || !m.PID.Equal(pid) {
		t.Fatalf("first word to the registry %#v, want Dropped", m)
	}
	if _, ok := testkit.Recv(t, told, "the parent to report idle").(*local.Idle); !ok {
		t.Fatal("no Idle after the drop")
	}
	if n := listening.Load(); n != 0 {
		t.Fatalf("listener count %d after the subscriber stopped", n)
	}
}
