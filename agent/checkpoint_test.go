package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contract S9: each tool result is checkpointed as it arrives, not once
// the whole turn's calls returned: while one call still runs, another's
// finished result is in the log; after a crash, a resumed activation
// keeps it and answers only the call that never finished as interrupted,
// the results in the order of the calls (F1).
func TestS9_EachToolResultIsCheckpointedAsItArrives(t *testing.T) {
	store := &watchedStore{Store: persistence.NewMemory(), watch: "fast result", logged: make(chan struct{}, 1)}
	fastDone, slowEntered := make(chan struct{}), make(chan struct{})
	fast := &fakeTool{name: "fast", call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
		defer close(fastDone)
		return "fast result", nil
	}}
	slow := &fakeTool{name: "slow", call: func(ctx context.Context, _ *agent.Agent, _ json.RawMessage) (string, error) {
		close(slowEntered)
		<-ctx.Done()
		return "", context.Cause(ctx)
	}}
	model := &script{steps: []func(agent.Request) agent.Response{call(tc("s", "slow", `{}`), tc("f", "fast", `{}`))}}
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{fast, slow}})
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	done := make(chan subagent.Result, 1)
	go func() { done <- a.Run(ctx, prompt("go"), nil) }()
	testkit.Recv(t, slowEntered, "the slow call")
	testkit.Recv(t, fastDone, "the fast call")
	// The fast result reaches the log while the slow call runs.
	testkit.Recv(t, store.logged, "the fast result's checkpoint")
	select {
	case res := <-done:
		t.Fatalf("the run ended %s with the slow call", res.StopReason)
	default:
	}
	cancel() // the crash, as far as the log can tell
	testkit.Recv(t, done, "the cancelled run")

	next := &script{steps: []func(agent.Request) agent.Response{answer("ok")}}
	b := newAgent(t, agent.Config{Store: store, Header: a.Header(), Resume: true, Model: next})
	wantStop(t, b.Run(testkit.Ctx(t), prompt("again"), nil), subagent.Completed)
	msgs := next.requests()[0].Messages
	if rolesOf(msgs) != "user assistant tool tool user" || msgs[2].ToolCallID != "s" || !msgs[2].IsError ||
		msgs[3].ToolCallID != "f" || subagent.TextOf(msgs[3].Content) != "fast result" {
		t.Fatalf("the resumed request %+v", msgs)
	}
}

// watchedStore tells logged when an append carries watch.
type watchedStore struct {
	persistence.Store
	watch  string
	logged chan struct{}
}

func (s *watchedStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	seq, err := s.Store.AppendAt(ctx, id, expect, recs...)
	if err == nil && strings.Contains(strings.Join(texts(recs), "|"), s.watch) {
		select {
		case s.logged <- struct{}{}:
		default:
		}
	}
	return seq, err
}

// texts is the text of the model-visible records.
func texts(recs []persistence.Record) []string {
	var out []string
	for _, r := range recs {
		var m agent.Message
		if r.Kind == persistence.KindMessage && json.Unmarshal(r.Data, &m) == nil {
			out = append(out, subagent.TextOf(m.Content))
		}
	}
	return out
}

// resultlessStore never stores a tool result while armed: the process
// died before any of them was written.
type resultlessStore struct {
	persistence.Store
	armed atomic.Bool
}

var errDied = errors.New("the process died")

func (s *resultlessStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	for _, r := range recs {
		var m agent.Message
		if s.armed.Load() && r.Kind == persistence.KindMessage && json.Unmarshal(r.Data, &m) == nil && m.Role == agent.ToolRole {
			return 0, errDied
		}
	}
	return s.Store.AppendAt(ctx, id, expect, recs...)
}

// recoverTool is a Recoverer that records the CallRef each of its calls
// and recoveries found in its ctx, and how many recoveries ran at once.
type recoverTool struct {
	fakeTool
	mu                sync.Mutex
	called, recovered map[string]agent.CallRef // by the call's args
	running, most     int
}

func (t *recoverTool) Call(ctx context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
	ref, _ := agent.CallOf(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.called[string(args)] = ref
	return "first", nil
}

func (t *recoverTool) Recover(ctx context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
	ref, ok := agent.CallOf(ctx)
	t.mu.Lock()
	t.running++
	t.most = max(t.most, t.running)
	if ok {
		t.recovered[string(args)] = ref
	}
	t.mu.Unlock()
	defer func() { t.mu.Lock(); t.running--; t.mu.Unlock() }()
	if strings.Contains(string(args), "give up") {
		return "", agent.ErrInterrupted
	}
	return "recovered " + string(args), nil
}

// Contract S9 (the loop's part): a run that continues a turn whose calls
// have no results asks a Recoverer's Recover for each of its calls, with
// the CallRef its Call had (so that what the call started can be found
// from the call), within the parallel cap; a call of any other tool, or
// one Recover gives up on, is answered as interrupted; the results are in
// call order and the model then sees them all.
func TestS9_ResumeRecoversTheCallsOfRecoverers(t *testing.T) {
	store := &resultlessStore{Store: persistence.NewMemory()}
	store.armed.Store(true)
	rec := &recoverTool{fakeTool: fakeTool{name: "rec"}, called: map[string]agent.CallRef{}, recovered: map[string]agent.CallRef{}}
	plain := &fakeTool{name: "plain"}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("a", "rec", `{"n":"a"}`), tc("p", "plain", `{}`), tc("b", "rec", `{"n":"b"}`), tc("g", "rec", `{"n":"give up"}`)),
	}}
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{rec, plain}})
	if res := a.Run(testkit.Ctx(t), prompt("go"), nil); !errors.Is(res.Cause, errDied) {
		t.Fatalf("the first run stopped %s: %s", res.StopReason, res.Detail)
	}
	store.armed.Store(false)

	next := &script{steps: []func(agent.Request) agent.Response{answer("ok")}}
	b := newAgent(t, agent.Config{Store: store, Header: a.Header(), Resume: true, Model: next, Tools: []agent.Tool{rec, plain}, MaxParallelTools: 1})
	wantStop(t, b.Run(testkit.Ctx(t), nil, nil), subagent.Completed)
	if len(rec.called) != 3 || len(rec.recovered) != 3 {
		t.Fatalf("calls %v, recoveries %v: want all three calls of rec recovered", rec.called, rec.recovered)
	}
	for args, ref := range rec.called {
		if ref.Seq == 0 || rec.recovered[args] != ref {
			t.Fatalf("call %s had %+v, its recovery %+v", args, ref, rec.recovered[args])
		}
	}
	if rec.most != 1 {
		t.Fatalf("%d recoveries ran at once under a parallel cap of 1", rec.most)
	}
	msgs := next.requests()[0].Messages
	want := []string{`recovered {"n":"a"}`, "tool call plain was interrupted before it finished", `recovered {"n":"b"}`, "tool call rec was interrupted before it finished"}
	if rolesOf(msgs) != "user assistant tool tool tool tool" {
		t.Fatalf("the resumed request %+v", msgs)
	}
	for i, w := range want {
		m := msgs[2+i]
		if m.ToolCallID != msgs[1].ToolCalls[i].ID || subagent.TextOf(m.Content) != w || m.IsError != strings.Contains(w, "interrupted") {
			t.Fatalf("result %d is %+v, want %q", i, m, w)
		}
	}
}
