package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// appender is a model that calls a tool for steps steps, then answers, and
// appends to the request's history as a careless model might.
type appender struct {
	steps int
	seen  [][]agent.Message // a deep copy of each request's history
}

func (m *appender) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	b, _ := json.Marshal(req.Messages)
	var cp []agent.Message
	_ = json.Unmarshal(b, &cp)
	m.seen = append(m.seen, cp)
	_ = append(req.Messages, agent.Message{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text("injected")}})
	if len(m.seen) <= m.steps {
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{tc(fmt.Sprint(len(m.seen)), "t", `{}`)}}}, nil
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("done")}}}, nil
}

// The history is shared with the model, not copied per step: what each
// request carried is exactly the session log up to that step, and a model
// appending to its request changes neither the loop's history nor the log.
func TestHistoryIsSharedReadOnlyAndMatchesTheLog(t *testing.T) {
	store := persistence.NewMemory()
	model := &appender{steps: 40}
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{&fakeTool{name: "t"}}, MaxSteps: 100})
	if res := a.Run(testkit.Ctx(t), prompt("go"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("run %+v", res)
	}
	_, recs, err := store.Load(testkit.Ctx(t), a.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	var logged []agent.Message
	for _, r := range messageRecords(recs) {
		var m agent.Message
		if err := json.Unmarshal(r.Data, &m); err != nil {
			t.Fatal(err)
		}
		logged = append(logged, m)
	}
	if !reflect.DeepEqual(a.Turns(), logged) {
		t.Fatal("the loop's history and the session log differ")
	}
	for i, seen := range model.seen {
		if !reflect.DeepEqual(seen, logged[:len(seen)]) {
			t.Fatalf("request %d carried a history that is not the log's prefix", i+1)
		}
	}
	for _, m := range logged {
		if subagent.TextOf(m.Content) == "injected" {
			t.Fatal("a model's append reached the history")
		}
	}
}

// Contract K3: the memory store takes the loop's own records without
// checking them again, but a log-only record the embedder hands New is
// checked still: data that is not JSON is refused, seeded or not, and no
// session is left.
func TestK3_LogOnlyRecordsAreCheckedBesideTheLoopsOwn(t *testing.T) {
	bad := persistence.Record{Kind: "subagent/descriptor", Data: json.RawMessage(`{"version":`)}
	seed := []agent.Message{{Role: agent.User, Content: prompt("hi")}}
	for _, seed := range [][]agent.Message{nil, seed} {
		store := persistence.NewMemory()
		h := subagent.SessionHeader{SessionID: "s"}
		_, err := agent.New(testkit.Ctx(t), agent.Config{Store: store, Model: &script{}, Header: h, Seed: seed, LogOnly: []persistence.Record{bad}})
		if !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("seed %d turns: New = %v, want ErrInvalid", len(seed), err)
		}
		if _, err := store.Header(testkit.Ctx(t), "s"); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("seed %d turns: the session is left: %v", len(seed), err)
		}
	}
}

// A new session can start with seeded turns and log-only records, created
// with it at once; the seed is history the model sees, the log-only
// records are not. An empty prompt continues a session as it is.
func TestSeededSessionAndContinuation(t *testing.T) {
	store := persistence.NewMemory()
	seed := []agent.Message{
		{Role: agent.User, Content: prompt("what is in a?")},
		{Role: agent.Assistant, Content: prompt("two files")},
	}
	descriptor := persistence.Record{Kind: "subagent/descriptor", Data: json.RawMessage(`{"version":1}`)}
	model := &script{steps: []func(agent.Request) agent.Response{answer("first"), answer("second")}}
	a := newAgent(t, agent.Config{Store: store, Model: model, Seed: seed, LogOnly: []persistence.Record{descriptor}})
	if res := a.Run(testkit.Ctx(t), prompt("and b?"), nil); subagent.TextOf(res.Output) != "first" {
		t.Fatalf("run %+v", res)
	}
	if got := rolesOf(model.requests()[0].Messages); got != "user assistant user" {
		t.Fatalf("first request roles %q, want the seed then the prompt", got)
	}
	_, recs, err := store.Load(testkit.Ctx(t), a.SessionID())
	if err != nil || len(recs) != 6 || recs[0].Kind != "subagent/descriptor" || recs[5].Kind != agentlog.KindStop {
		t.Fatalf("log %+v, %v", recs, err)
	}
	// Continue without a prompt: the model answers from the history.
	resumed, err := agent.New(testkit.Ctx(t), agent.Config{Store: store, Model: model, Header: subagent.SessionHeader{SessionID: a.SessionID()}, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if res := resumed.Run(testkit.Ctx(t), nil, nil); subagent.TextOf(res.Output) != "second" {
		t.Fatalf("continued run %+v", res)
	}
	if got := rolesOf(model.requests()[1].Messages); got != "user assistant user assistant" {
		t.Fatalf("continued request roles %q", got)
	}
	empty := newAgent(t, agent.Config{Store: store, Model: model, Header: subagent.SessionHeader{SessionID: "empty"}})
	if res := empty.Run(testkit.Ctx(t), nil, nil); res.StopReason != subagent.Error {
		t.Fatalf("continuing an empty session: %+v", res)
	}
}

// An activation that ends without a final turn (cancelled here) still
// leaves how it stopped as the log's last record.
func TestACancelledRunRecordsHowItStopped(t *testing.T) {
	store := persistence.NewMemory()
	a := newAgent(t, agent.Config{Store: store, Model: modelFunc(func(ctx context.Context, _ agent.Request) (agent.Response, error) {
		<-ctx.Done()
		return agent.Response{}, ctx.Err()
	})})
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	cancel()
	if res := a.Run(ctx, prompt("x"), nil); res.StopReason != subagent.Aborted {
		t.Fatalf("run %+v", res)
	}
	_, recs, err := store.Load(testkit.Ctx(t), a.SessionID())
	var stop agentlog.Stop
	if err != nil || recs[len(recs)-1].Kind != agentlog.KindStop || json.Unmarshal(recs[len(recs)-1].Data, &stop) != nil || stop.StopReason != subagent.Aborted {
		t.Fatalf("log %v, %v", recs, err)
	}
}
