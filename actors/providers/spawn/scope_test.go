package spawn_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

// Contract S4: a tool filter naming a tool the child does not have is a
// typed Start error, and nothing is created.
func TestS4_AToolFilterNamingAMissingToolFailsBeforeAnyChild(t *testing.T) {
	e := newEnv(t)
	tools, err := fstools.New(t.TempDir(), fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.register(t, spawn.Config{Tools: tools})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	created := e.store.creates()
	for _, c := range []struct {
		filter  subagent.ToolFilter
		unknown string // the tools the error names
	}{
		{subagent.ToolFilter{Allow: []string{"read", "raed"}}, "raed"},
		{subagent.ToolFilter{Deny: []string{"shell"}}, "shell"},
	} {
		_, err := e.svc.Start(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("x"), Parent: parent, ToolFilter: &c.filter})
		if !errors.Is(err, subagent.ErrUnknownTool) || !strings.HasSuffix(err.Error(), "the child does not have: "+c.unknown) {
			t.Fatalf("filter %+v: %v", c.filter, err)
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
		ev := testkit.Recv(t, events, "the run's events")
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

// closingStore closes a parent agent as the provider creates its child's
// session: the parent closes while the provider sets up.
type closingStore struct {
	persistence.Store
	parent *agent.Agent
}

func (s closingStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	seq, err := s.Store.CreateWith(ctx, h, recs...)
	if s.parent != nil && h.SessionID != s.parent.SessionID() {
		s.parent.Close()
	}
	return seq, err
}

// Contract S4: a Start from a closed parent, or one whose parent closes
// while the provider sets up, fails with ErrParentClosed: no child, no
// session, no events. A parent that closes while its child runs cancels
// the child.
func TestS4_AClosedParentStartsNoChild(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{})
	events := make(chan subagent.Event, 8)

	closed := e.parent(t, "closed", 0, subagent.AgentOptions{})
	defer e.svc.ListenParent(closed.SessionID(), func(ev subagent.Event) error { events <- ev; return nil }).Release()
	closed.Close()
	created := e.store.creates()
	if _, err := e.svc.Start(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("echo x"), Parent: closed}); !errors.Is(err, subagent.ErrParentClosed) {
		t.Fatalf("Start from a closed parent: %v", err)
	}
	if e.store.creates() != created {
		t.Fatal("a closed parent's start created a session")
	}

	// Closing during setup: a provider on a store that closes the parent
	// as it creates the child's session.
	store := closingStore{Store: persistence.NewMemory()}
	closing, err := agent.New(t.Context(), agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "closing"}})
	if err != nil {
		t.Fatal(err)
	}
	store.parent = closing
	p, err := spawn.New(spawn.Config{Name: "closing", System: e.sys, Store: store, Model: scripted.New()})
	if err != nil {
		t.Fatal(err)
	}
	release, err := e.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	defer e.svc.ListenParent(closing.SessionID(), func(ev subagent.Event) error { events <- ev; return nil }).Release()
	live := testkit.LiveActors(e.sys)
	if _, err := e.svc.Start(testkit.Ctx(t), "closing", subagent.StartRequest{Prompt: prompt("echo x"), Parent: closing}); !errors.Is(err, subagent.ErrParentClosed) {
		t.Fatalf("Start whose parent closed during setup: %v", err)
	}
	if sessions, _ := store.Sessions(t.Context()); len(sessions) != 1 || testkit.LiveActors(e.sys) != live {
		t.Fatalf("after the rollback: %d sessions (want the parent's only), live actors %d→%d", len(sessions), live, testkit.LiveActors(e.sys))
	}
	select {
	case ev := <-events:
		t.Fatalf("an event for a start that failed: %#v", ev)
	default:
	}

	// Closing while the child runs cancels it.
	running := e.parent(t, "running", 0, subagent.AgentOptions{})
	steps := make(chan struct{}, 64)
	e.register(t, spawn.Config{Name: "slow", Model: blockingModel{steps}})
	r, err := e.svc.Start(testkit.Ctx(t), "slow", subagent.StartRequest{Prompt: prompt("x"), Parent: running})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, steps, "the child's model call")
	running.Close()
	res := finish(t, r)
	if res.StopReason != subagent.Aborted || !errors.Is(res.Cause, subagent.ErrParentClosed) {
		t.Fatalf("the child of a parent that closed settled %+v", res)
	}
}

// blockingModel reports each call and waits for its context.
type blockingModel struct{ calls chan<- struct{} }

func (m blockingModel) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	m.calls <- struct{}{}
	<-ctx.Done()
	return agent.Response{}, context.Cause(ctx)
}

// Contract E6: a progress listener that blocks does not slow the child: it
// runs to its end while the listener holds its first event.
func TestE6_ABlockedProgressListenerDoesNotSlowTheChild(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	unblock, entered := make(chan struct{}), make(chan struct{}, 1)
	defer close(unblock)
	defer e.svc.ListenParent(parent.SessionID(), func(subagent.Event) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-unblock
		return nil
	}).Release()
	_, res := e.start(t, subagent.StartRequest{Prompt: prompt("echo hi"), Parent: parent})
	if res.StopReason != subagent.Completed {
		t.Fatalf("child %+v", res)
	}
	testkit.Recv(t, entered, "the listener to hold an event")
}
