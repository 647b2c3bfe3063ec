package agent_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contract S8 (one writer per child log): an activation takes the log
// when it resumes it, so an older activation still holding the log cannot
// append after it: its write fails with persistence.ErrConflict, the run
// settles as an infrastructure error, and the log holds none of its
// records. On every store.
func TestS8_AStaleActivationCannotAppendAfterTheNextTookTheLog(t *testing.T) {
	bolt, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	for name, store := range map[string]persistence.Store{"memory": persistence.NewMemory(), "bolt": bolt} {
		t.Run(name, func(t *testing.T) {
			h := subagent.SessionHeader{SessionID: "child"}
			first := newAgent(t, agent.Config{Store: store, Header: h, Model: &script{steps: []func(agent.Request) agent.Response{answer("one")}}})
			wantStop(t, first.Run(testkit.Ctx(t), prompt("first"), nil), subagent.Completed)

			stale := newAgent(t, agent.Config{Store: store, Header: h, Resume: true, Model: &script{steps: []func(agent.Request) agent.Response{answer("stale")}}})
			next := newAgent(t, agent.Config{Store: store, Header: h, Resume: true, Model: &script{steps: []func(agent.Request) agent.Response{answer("next")}}})

			res := stale.Run(testkit.Ctx(t), prompt("from the stale one"), nil)
			wantStop(t, res, subagent.Error)
			if !errors.Is(res.Cause, persistence.ErrConflict) || !errors.Is(res.Cause, agent.ErrCheckpoint) {
				t.Fatalf("the stale activation's cause %v, want a checkpoint error wrapping ErrConflict", res.Cause)
			}
			wantStop(t, next.Run(testkit.Ctx(t), prompt("from the next one"), nil), subagent.Completed)

			_, recs, err := store.Load(testkit.Ctx(t), "child")
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, r := range recs {
				if r.Kind == persistence.KindMessage {
					texts = append(texts, string(r.Data))
				}
			}
			for _, tx := range texts {
				if strings.Contains(tx, "stale") {
					t.Fatalf("the stale activation wrote to the log: %s", tx)
				}
			}
			if len(texts) != 4 {
				t.Fatalf("log turns %q, want the first activation's two and the next one's two", texts)
			}
		})
	}
}

// Contract R5: the final answer's message-text progress is told only once
// the answer is durable: a final turn the log refuses publishes no text.
func TestR5_MessageTextOnlyAfterTheAnswerIsDurable(t *testing.T) {
	for _, refused := range []bool{false, true} {
		ok := 10
		if refused {
			ok = 1 // the prompt is logged, the answer is not
		}
		var kinds []subagent.ProgressKind
		store := &failingStore{Store: persistence.NewMemory(), ok: ok}
		a := newAgent(t, agent.Config{Store: store, Model: &script{steps: []func(agent.Request) agent.Response{answer("the answer")}},
			OnStep: func(s agent.Step) { kinds = append(kinds, s.Kind) }})
		res := a.Run(testkit.Ctx(t), prompt("go"), nil)
		told := slices.Contains(kinds, subagent.MessageText)
		switch {
		case refused && (res.StopReason != subagent.Error || told):
			t.Fatalf("a refused answer: %s, steps %v", res.StopReason, kinds)
		case !refused && (res.StopReason != subagent.Completed || !told):
			t.Fatalf("a durable answer: %s, steps %v", res.StopReason, kinds)
		}
	}
}
