package spawn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/fork"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/agenttest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// startOn is env.start on the provider named name.
func (e *env) startOn(t *testing.T, name string, req subagent.StartRequest) (subagent.Run, subagent.Result) {
	t.Helper()
	run, err := e.svc.Start(testkit.Ctx(t), name, req)
	if err != nil {
		t.Fatalf("Start on %s: %v", name, err)
	}
	return run, finish(t, run)
}

func texts(msgs []agent.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+subagent.TextOf(m.Content))
	}
	return out
}

// echoLast answers with "re: " and the text of the last user message.
func echoLast(req agent.Request) agent.Response {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == agent.User {
			return final("re: " + subagent.TextOf(m.Content))
		}
	}
	return final("nothing")
}

// Contracts S6, D1: a finished child is resumed from its log with its
// earlier turns; the new run has its own id, the same session, and an
// output that is only what it produced.
func TestS6D1_ResumeContinuesAChildWithItsEarlierTurns(t *testing.T) {
	e := newEnv(t)
	model := agenttest.NewRecorder(echoLast)
	e.register(t, spawn.Config{Model: model})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	persona := "terse"
	first, res := e.start(t, subagent.StartRequest{Prompt: prompt("one"), Parent: parent, Persona: &persona})
	if subagent.TextOf(res.Output) != "re: one" {
		t.Fatalf("first activation %+v", res)
	}
	_, recs, err := e.store.Load(t.Context(), first.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	d, err := descriptor.Fold(recs)
	if err != nil || d.Provider != spawn.DefaultName || d.Persona == nil || *d.Persona != "terse" {
		t.Fatalf("descriptor %+v, %v", d, err)
	}
	again, err := e.svc.Resume(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{
		Prompt: prompt("two"), Parent: parent,
		Continuation: &subagent.Continuation{SessionID: first.SessionID()},
	})
	if err != nil {
		t.Fatal(err)
	}
	res = finish(t, again)
	if subagent.TextOf(res.Output) != "re: two" || again.SessionID() != first.SessionID() || again.ID() == first.ID() {
		t.Fatalf("resumed run %q session %q: %+v", again.ID(), again.SessionID(), res)
	}
	reqs := model.Requests("one")
	last := reqs[len(reqs)-1]
	if got := texts(last.Messages); !slices.Equal(got, []string{"user:one", "assistant:re: one", "user:two"}) {
		t.Fatalf("the resumed child saw %v", got)
	}
	if last.System != "terse" {
		t.Fatalf("the resumed child's persona %q, want the descriptor's", last.System)
	}
}

// Contract S6: a child that died mid-turn (its log ends in a tool call
// without a result) continues from its last complete turn: the call gets
// an error result saying it was interrupted, and the model goes on.
func TestS6_ResumeAfterDyingMidTurn(t *testing.T) {
	e := newEnv(t)
	model := agenttest.NewRecorder(echoLast)
	e.register(t, spawn.Config{Model: model})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	first, _ := e.start(t, subagent.StartRequest{Prompt: prompt("one"), Parent: parent})
	// The process died after the model asked for a tool.
	call, _ := json.Marshal(agent.Message{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "list", Args: json.RawMessage(`{}`)}}})
	if err := e.store.Append(t.Context(), first.SessionID(), persistence.Record{Kind: persistence.KindMessage, Data: call}); err != nil {
		t.Fatal(err)
	}
	again, err := e.svc.Resume(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Parent: parent, Continuation: &subagent.Continuation{SessionID: first.SessionID()}})
	if err != nil {
		t.Fatal(err)
	}
	res := finish(t, again)
	reqs := model.Requests("one")
	last := reqs[len(reqs)-1].Messages
	interrupted := last[len(last)-1]
	if interrupted.Role != agent.ToolRole || !interrupted.IsError || !strings.Contains(subagent.TextOf(interrupted.Content), "interrupted") {
		t.Fatalf("the half-finished call came back as %+v", interrupted)
	}
	if subagent.TextOf(res.Output) != "re: one" || res.StopReason != subagent.Completed {
		t.Fatalf("resumed run %+v", res)
	}
}

// Contract D5: a resumed child keeps its stored depth; a deeper parent may
// push it deeper, a shallower one never makes it top level.
func TestD5_AResumedChildKeepsItsDepth(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{Model: agenttest.NewRecorder(echoLast)})
	deep := e.parent(t, "deep", 2, subagent.AgentOptions{})
	first, _ := e.start(t, subagent.StartRequest{Prompt: prompt("x"), Parent: deep})
	for _, c := range []struct {
		parentDepth, want int
	}{{0, 3}, {5, 6}} {
		p := e.parent(t, fmt.Sprint("at-", c.parentDepth), c.parentDepth, subagent.AgentOptions{})
		r, err := e.svc.Resume(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("y"), Parent: p, Continuation: &subagent.Continuation{SessionID: first.SessionID()}})
		if err != nil {
			t.Fatal(err)
		}
		if got := subagent.DelegationDepthOf(r.LocalAgent()); got != c.want {
			t.Fatalf("resumed from a parent at depth %d: child at depth %d, want %d", c.parentDepth, got, c.want)
		}
		finish(t, r)
	}
}

// Contracts S6, K3: resuming a session that does not exist, or one started
// by another provider, is a typed error, and nothing stored changes.
func TestS6_ResumeOfAnUnknownOrForeignSessionIsATypedError(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{Model: agenttest.NewRecorder(echoLast)})
	f, err := fork.New(spawn.Config{System: e.sys, Store: e.store, Model: agenttest.NewRecorder(echoLast)})
	if err != nil {
		t.Fatal(err)
	}
	release, _ := e.svc.RegisterProvider(f)
	defer release()
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	var invalid *subagent.InvalidRequestError
	_, err = e.svc.Resume(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Parent: parent, Continuation: &subagent.Continuation{SessionID: "nobody"}})
	if !errors.As(err, &invalid) || !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("resume of an unknown session: %v", err)
	}
	first, _ := e.start(t, subagent.StartRequest{Prompt: prompt("x"), Parent: parent})
	_, before, _ := e.store.Load(t.Context(), first.SessionID())
	if _, err := e.svc.Resume(testkit.Ctx(t), fork.DefaultName, subagent.StartRequest{Parent: parent, Continuation: &subagent.Continuation{SessionID: first.SessionID()}}); !errors.As(err, &invalid) {
		t.Fatalf("a fork provider resuming a spawned child: %v", err)
	}
	if _, after, _ := e.store.Load(t.Context(), first.SessionID()); len(after) != len(before) {
		t.Fatalf("a refused resume changed the log: %d records, %d before", len(after), len(before))
	}
}

// Contracts P2, P5: a forked child starts with its parent's completed turns,
// never the turn in flight, even when that turn has other tool calls
// pending beside the delegation; resuming it never re-forks the parent's
// newer history.
func TestP2P5_AForkSeesTheParentsCompletedTurnsOnly(t *testing.T) {
	e := newEnv(t)
	childModel := agenttest.NewRecorder(echoLast)
	f, err := fork.New(spawn.Config{System: e.sys, Store: e.store, Model: childModel})
	if err != nil {
		t.Fatal(err)
	}
	if !f.InheritsParentContext() || f.Name() != fork.DefaultName {
		t.Fatalf("fork provider %q inherits %v", f.Name(), f.InheritsParentContext())
	}
	release, _ := e.svc.RegisterProvider(f)
	defer release()
	// A parent with one completed exchange, in the middle of a turn that
	// called two tools: one still running, and the delegation.
	parentModel := agenttest.NewRecorder(echoLast)
	parent, err := agent.New(t.Context(), agent.Config{Store: e.store, Model: parentModel, Header: subagent.SessionHeader{SessionID: "forking"}})
	if err != nil {
		t.Fatal(err)
	}
	if res := parent.Run(testkit.Ctx(t), prompt("hello"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("parent's first turn %+v", res)
	}
	// Turns() stops short of an assistant turn whose calls have no
	// results: append one as the running turn would have.
	pending, _ := json.Marshal(agent.Message{Role: agent.Assistant, ToolCalls: []agent.ToolCall{
		{ID: "a", Name: "slow", Args: json.RawMessage(`{}`)}, {ID: "b", Name: "fork", Args: json.RawMessage(`{}`)},
	}})
	if err := e.store.Append(t.Context(), "forking", persistence.Record{Kind: persistence.KindMessage, Data: pending}); err != nil {
		t.Fatal(err)
	}
	parent, err = agent.New(t.Context(), agent.Config{Store: e.store, Model: parentModel, Header: subagent.SessionHeader{SessionID: "forking"}, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	child, res := e.startOn(t, fork.DefaultName, subagent.StartRequest{Prompt: prompt("check"), Parent: parent})
	if subagent.TextOf(res.Output) != "re: check" {
		t.Fatalf("fork answered %+v", res)
	}
	seen := texts(childModel.First(t, "hello").Messages)
	if !slices.Equal(seen, []string{"user:hello", "assistant:re: hello", "user:check"}) {
		t.Fatalf("the fork saw %v, want the completed turns and its prompt", seen)
	}
	// The parent goes on; a resumed fork continues from its own log.
	if res := parent.Run(testkit.Ctx(t), prompt("newer"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("parent's next turn %+v", res)
	}
	again, err := e.svc.Resume(testkit.Ctx(t), fork.DefaultName, subagent.StartRequest{Prompt: prompt("more"), Parent: parent, Continuation: &subagent.Continuation{SessionID: child.SessionID()}})
	if err != nil {
		t.Fatal(err)
	}
	finish(t, again)
	reqs := childModel.Requests("hello")
	for _, m := range texts(reqs[len(reqs)-1].Messages) {
		if strings.Contains(m, "newer") {
			t.Fatalf("a resumed fork saw the parent's newer history: %v", texts(reqs[len(reqs)-1].Messages))
		}
	}
}

// flakyModel panics on its first call, then answers.
type flakyModel struct{ calls atomic.Int32 }

func (m *flakyModel) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	if m.calls.Add(1) == 1 {
		panic("model bug")
	}
	return echoLast(req), nil
}

// Contract A2: a spawned child that crashes continues from its log within
// the embedder's restart policy.
func TestA2_ACrashedSpawnedChildContinuesFromItsLog(t *testing.T) {
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	svc := registry.New(sys, registry.WithRunRestarts(subagent.RestartPolicy{Max: 1, Window: time.Hour}))
	t.Cleanup(svc.Close)
	e := &env{sys: sys, svc: svc, store: &spyStore{Store: persistence.NewMemory()}}
	model := &flakyModel{}
	e.register(t, spawn.Config{Model: model})
	_, res := e.start(t, subagent.StartRequest{Prompt: prompt("work"), Parent: e.parent(t, "p", 0, subagent.AgentOptions{})})
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "re: work" || model.calls.Load() != 2 {
		t.Fatalf("a crashed child settled %+v after %d model calls", res, model.calls.Load())
	}
}

// failingStore refuses appends once failAfter have succeeded.
type failingStore struct {
	persistence.Store
	left atomic.Int32
}

func (s *failingStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	if s.left.Add(-1) < 0 {
		return 0, errors.New("disk full")
	}
	return s.Store.AppendAt(ctx, id, expect, recs...)
}

// Contract R5: a completed result means the log acknowledged the final
// turn; a turn the log refused is an infrastructure error, and the
// unconfirmed output is not published.
func TestR5_AnUnconfirmedFinalTurnIsAnInfrastructureError(t *testing.T) {
	e := newEnv(t)
	store := &failingStore{Store: persistence.NewMemory()}
	store.left.Store(0) // the prompt is logged with the session, the answer is not
	p, err := spawn.New(spawn.Config{Name: "fragile", System: e.sys, Store: store, Model: agenttest.NewRecorder(echoLast)})
	if err != nil {
		t.Fatal(err)
	}
	release, _ := e.svc.RegisterProvider(p)
	defer release()
	parent, err := agent.New(t.Context(), agent.Config{Store: store, Model: agenttest.NewRecorder(echoLast), Header: subagent.SessionHeader{SessionID: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Start(testkit.Ctx(t), "fragile", subagent.StartRequest{Prompt: prompt("hello"), Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(testkit.Ctx(t))
	if derr := r.Dispose(testkit.Ctx(t)); derr != nil {
		t.Fatal(derr)
	}
	if !errors.Is(err, agent.ErrCheckpoint) || len(res.Output) != 0 || res.StopReason == subagent.Completed {
		t.Fatalf("a refused final turn settled %+v, %v", res, err)
	}
}

// modelsByName resolves every model provider and model to one model.
type modelsByName struct{ m agent.Model }

func (r modelsByName) Lookup(string, string) (agent.Model, error) { return r.m, nil }

// Contract D1: every child's log starts with its own descriptor, whatever
// children came before it (the spawn provider encodes the descriptor of a
// child without persona or tool filter once per model).
func TestD1_EachChildsDescriptorIsItsOwnWhateverCameBefore(t *testing.T) {
	e := newEnv(t)
	model := agenttest.NewRecorder(echoLast)
	e.register(t, spawn.Config{Model: model, Models: modelsByName{model}, Tools: []agent.Tool{&probe{}}})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	persona := "terse"
	cases := []struct {
		req  subagent.StartRequest
		want descriptor.Descriptor
	}{
		{subagent.StartRequest{}, descriptor.Descriptor{}},
		{subagent.StartRequest{Persona: &persona}, descriptor.Descriptor{Persona: &persona}},
		{subagent.StartRequest{}, descriptor.Descriptor{}},
		{subagent.StartRequest{ToolFilter: &subagent.ToolFilter{Allow: []string{"probe"}}},
			descriptor.Descriptor{ToolFilter: &subagent.ToolFilter{Allow: []string{"probe"}}}},
		{subagent.StartRequest{Options: subagent.AgentOptions{ModelProvider: "local", Model: "small"}},
			descriptor.Descriptor{AgentProvider: "local", AgentModel: "small"}},
		{subagent.StartRequest{Options: subagent.AgentOptions{ModelProvider: "local", Model: "large"}},
			descriptor.Descriptor{AgentProvider: "local", AgentModel: "large"}},
		{subagent.StartRequest{}, descriptor.Descriptor{}},
	}
	for i, c := range cases {
		c.req.Prompt, c.req.Parent = prompt("hi"), parent
		run, _ := e.start(t, c.req)
		_, recs, err := e.store.Load(t.Context(), run.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		got, err := descriptor.Fold(recs)
		c.want.Version, c.want.Provider = descriptor.Version, spawn.DefaultName
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("child %d: descriptor %+v, %v; want %+v", i, got, err, c.want)
		}
	}
}
