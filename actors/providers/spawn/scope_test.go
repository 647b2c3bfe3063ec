package spawn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/internal/await"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

// Contract S4: a tool filter naming a tool the child does not have is a
// typed Start error, and nothing is created.
func TestS4_AToolFilterNamingAMissingToolFailsBeforeAnyChild(t *testing.T) {
	e := newEnv(t)
	tools, err := fstools.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.register(t, spawn.Config{Tools: tools})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	created := e.store.creates()
	for _, f := range []*subagent.ToolFilter{
		{Allow: []string{"read", "raed"}},
		{Deny: []string{"shell"}},
	} {
		_, err := e.svc.Start(await.Ctx(t), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("x"), Parent: parent, ToolFilter: f})
		var u *subagent.UnknownToolError
		if !errors.As(err, &u) || !errors.Is(err, subagent.ErrUnknownTool) || len(u.Names) != 1 {
			t.Fatalf("filter %+v: %v", f, err)
		}
	}
	if e.store.creates() != created {
		t.Fatal("a rejected filter created a session")
	}
}

// Contracts R1, E2, E6: a fresh child's session id is its run id, the
// one id its events carry, and its progress reaches the parent's
// listeners between start and end.
func TestR1E6_OneIdAndProgressBetweenStartAndEnd(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	events := make(chan subagent.Event, 64)
	defer e.svc.ListenParent(parent.SessionID(), func(ev subagent.Event) error { events <- ev; return nil }).Release()
	run, res := e.start(t, subagent.StartRequest{Prompt: prompt("echo hi"), Parent: parent})
	if res.StopReason != subagent.Completed || run.SessionID() != run.ID() {
		t.Fatalf("run %q session %q result %+v", run.ID(), run.SessionID(), res)
	}
	var kinds []string
	for {
		ev := await.Recv(t, events, "the run's events")
		switch ev := ev.(type) {
		case subagent.RunStarted:
			kinds = append(kinds, "start")
		case subagent.RunProgress:
			if ev.RunID != run.ID() {
				t.Fatalf("progress for run %q", ev.RunID)
			}
			kinds = append(kinds, string(ev.Kind))
		case subagent.RunEnded:
			kinds = append(kinds, "end")
		}
		if kinds[len(kinds)-1] == "end" {
			break
		}
	}
	want := []string{"start", string(subagent.ModelCallStarted), string(subagent.ModelCallFinished), string(subagent.MessageText), "end"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
}
