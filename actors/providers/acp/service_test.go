package acp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract E1/E6/P3 through the Service, as for every provider: Start
// returns a run once the agent's session exists; a parent's listener sees
// start, then the run's progress in order, then end with the stop reason;
// Wait and Dispose behave; the run is not local and offers no Steer; the
// provider is refused a feature it does not declare before it runs.
func TestP3_ThroughTheService(t *testing.T) {
	sys := newSystem(t)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	cfg := fakeConfig(t, sys, modeNormal)
	release, err := svc.RegisterProvider(newProvider(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	events := make(chan subagent.Event, 64)
	sub := svc.ListenParent(top.SessionID(), func(ev subagent.Event) error { events <- ev; return nil })
	t.Cleanup(sub.Release)

	r, err := svc.Start(testkit.Ctx(t), acp.DefaultName, request("say Hello", "tool t1 search Look around", "done t1", "say !"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(subagent.Steerer); ok {
		t.Fatal("the Service offers Steer on an ACP run")
	}
	res := wait(t, r)
	must(t, r.Dispose(testkit.Ctx(t)))
	must(t, r.Dispose(testkit.Ctx(t)))
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "Hello!" {
		t.Fatalf("result %+v", res)
	}
	must(t, sub.Flush(testkit.Ctx(t)))
	close(events)
	var kinds []string
	for ev := range events {
		switch ev := ev.(type) {
		case subagent.RunStarted:
			if ev.RunID != r.ID() || ev.Provider != acp.DefaultName || ev.Local {
				t.Fatalf("start %+v", ev)
			}
			kinds = append(kinds, "start")
		case subagent.RunProgress:
			if ev.RunID != r.ID() {
				t.Fatalf("progress of another run %+v", ev)
			}
			kinds = append(kinds, string(ev.Kind))
		case subagent.RunEnded:
			if ev.RunID != r.ID() || ev.StopReason != subagent.Completed || ev.LastAssistantMessage != "Hello!" {
				t.Fatalf("end %+v", ev)
			}
			kinds = append(kinds, "end")
		}
	}
	want := []string{"start", "text-delta", "tool-call-started", "tool-call-finished", "text-delta", "message-text", "end"}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}

	persona := "a pirate"
	req := request("say x")
	req.Persona = &persona
	if _, err := svc.Start(testkit.Ctx(t), acp.DefaultName, req); !errors.Is(err, subagent.ErrUnsupported) {
		t.Fatalf("persona: %v", err)
	}
	if starts(t, cfg) != 1 {
		t.Fatalf("%d agents started, want 1", starts(t, cfg))
	}
}

// Contract S5 through the Service: a run cancelled by its start context
// settles aborted and its end event says so.
func TestS5_CancelThroughTheService(t *testing.T) {
	sys := newSystem(t)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	release, err := svc.RegisterProvider(newProvider(t, fakeConfig(t, sys, modeNormal)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	progressed := make(chan struct{}, 1)
	ended := make(chan subagent.RunEnded, 1)
	sub := svc.ListenParent(top.SessionID(), func(ev subagent.Event) error {
		switch ev := ev.(type) {
		case subagent.RunProgress:
			select {
			case progressed <- struct{}{}:
			default:
			}
		case subagent.RunEnded:
			ended <- ev
		}
		return nil
	})
	t.Cleanup(sub.Release)
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r, err := svc.Start(ctx, acp.DefaultName, request("say working", "wait"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	testkit.Recv(t, progressed, "the run's first progress")
	cancel()
	if res := wait(t, r); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if ev := testkit.Recv(t, ended, "the end event"); ev.StopReason != subagent.Aborted {
		t.Fatalf("end %+v", ev)
	}
}
