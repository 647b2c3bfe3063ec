package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/await"
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
	ctx, cancel := context.WithCancel(await.Ctx(t))
	done := make(chan subagent.Result, 1)
	go func() { done <- a.Run(ctx, prompt("go"), nil) }()
	await.Recv(t, slowEntered, "the slow call")
	await.Recv(t, fastDone, "the fast call")
	// The fast result reaches the log while the slow call runs.
	await.Recv(t, store.logged, "the fast result's checkpoint")
	select {
	case res := <-done:
		t.Fatalf("the run ended %s with the slow call", res.StopReason)
	default:
	}
	cancel() // the crash, as far as the log can tell
	await.Recv(t, done, "the cancelled run")

	next := &script{steps: []func(agent.Request) agent.Response{answer("ok")}}
	b := newAgent(t, agent.Config{Store: store, Header: a.Header(), Resume: true, Model: next})
	wantStop(t, b.Run(await.Ctx(t), prompt("again"), nil), subagent.Completed)
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
