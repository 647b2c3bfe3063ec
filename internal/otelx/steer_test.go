package otelx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

// untilTold lists the working directory, step after step, until a
// request carries a second user message (the steer), and then answers.
type untilTold struct{}

func (untilTold) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	var told []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			told = append(told, subagent.TextOf(m.Content))
		}
	}
	if len(told) > 1 {
		return agent.Response{Message: agent.Message{Role: agent.Assistant,
			Content: []subagent.ContentBlock{subagent.Text("stopped: " + told[len(told)-1])}}}, nil
	}
	return agent.Response{Message: agent.Message{Role: agent.Assistant, ToolCalls: []agent.ToolCall{
		{ID: fmt.Sprint("list-", len(req.Messages)), Name: "list", Args: json.RawMessage(`{"path":"."}`)},
	}}}, nil
}

// Contract O2: an admitted steer is a subagent/steer event of the run's
// span, between its subagent/start and subagent/end.
func TestO2_SteerIsASpanEventOfTheRun(t *testing.T) {
	exp := testkit.Tracing(t)
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	store := persistence.NewMemory()
	tools, err := fstools.New(t.TempDir(), fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := spawn.New(spawn.Config{System: sys, Store: store, Model: untilTold{}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	parent, err := agent.New(t.Context(), agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Ctx(t)
	run, err := svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text("look until told")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.(subagent.Steerer).Steer(ctx, []subagent.ContentBlock{subagent.Text("enough")}); err != nil {
		t.Fatal(err)
	}
	if res, err := run.Wait(ctx); err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("%+v, %v", res, err)
	}
	if err := run.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range exp.GetSpans() {
		if s.Name != "invoke_agent "+spawn.DefaultName {
			continue
		}
		var events []string
		for _, e := range s.Events {
			events = append(events, e.Name)
			if e.Name == otelx.EventSteer && (len(e.Attributes) != 1 || e.Attributes[0].Key != otelx.SubSteerAdmitted || !e.Attributes[0].Value.AsBool()) {
				t.Errorf("steer event attributes %v", e.Attributes)
			}
		}
		if fmt.Sprint(events) != fmt.Sprint([]string{otelx.EventStart, otelx.EventSteer, otelx.EventEnd}) {
			t.Fatalf("run span events %v", events)
		}
		return
	}
	t.Fatal("no run span")
}
