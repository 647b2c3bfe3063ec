package parent_test

import (
	"context"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Contract E1.
func TestE1_AnEarlySettleIsHeldUntilItsStart(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	raw := sys.ActorSystem()
	pid := raw.Root.Spawn(parent.Props(slog.Default()))
	defer raw.Root.Stop(pid)
	got := make(chan subagent.Event, 4)
	if _, err := ask.Ask(context.Background(), raw, pid, &parent.Subscribe{Listener: func(ev subagent.Event) error {
		got <- ev
		return nil
	}}, nil); err != nil {
		t.Fatal(err)
	}
	raw.Root.Send(pid, &messages.Settled{RunId: "r1", Result: messages.FromResult(subagent.Result{
		Output: []subagent.ContentBlock{subagent.Text("hi")}, StopReason: subagent.Completed})})
	raw.Root.Send(pid, &messages.Published{RunId: "r1", Provider: "p", Id: "c1", Local: true})
	if ev := <-got; ev != (subagent.RunStarted{RunID: "r1", Provider: "p", ID: "c1", Local: true}) {
		t.Fatalf("first event %#v", ev)
	}
	want := subagent.RunEnded{RunID: "r1", Provider: "p", ID: "c1", Local: true, StopReason: subagent.Completed, LastAssistantMessage: "hi"}
	if ev := <-got; ev != want {
		t.Fatalf("second event %#v", ev)
	}
}
