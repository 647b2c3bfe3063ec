package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a fake model: it answers step i with steps[i](req) and records
// every request it saw.
type script struct {
	mu    sync.Mutex
	reqs  []agent.Request
	steps []func(agent.Request) agent.Response
}

func (s *script) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if len(s.reqs) > len(s.steps) {
		return agent.Response{}, fmt.Errorf("script: unexpected step %d", len(s.reqs))
	}
	return s.steps[len(s.reqs)-1](req), nil
}

func (s *script) requests() []agent.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Request(nil), s.reqs...)
}

func answer(text string) func(agent.Request) agent.Response {
	return func(agent.Request) agent.Response {
		return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(text)}}}
	}
}

func call(calls ...agent.ToolCall) func(agent.Request) agent.Response {
	return func(agent.Request) agent.Response {
		return agent.Response{Message: agent.Message{ToolCalls: calls}}
	}
}

func tc(id, name, args string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// modelFunc adapts a function to agent.Model.
type modelFunc func(context.Context, agent.Request) (agent.Response, error)

func (f modelFunc) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	return f(ctx, req)
}

// fakeTool runs call, or answers "<name> ok".
type fakeTool struct {
	name string
	call func(ctx context.Context, caller *agent.Agent, args json.RawMessage) (string, error)
}

func (t *fakeTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: t.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t *fakeTool) Call(ctx context.Context, caller *agent.Agent, args json.RawMessage) (string, error) {
	if t.call == nil {
		return t.name + " ok", nil
	}
	return t.call(ctx, caller, args)
}

// hiddenTool is a Conditional tool that is never available.
type hiddenTool struct {
	fakeTool
	asked chan *agent.Agent
}

func (t *hiddenTool) Available(a *agent.Agent) bool {
	t.asked <- a
	return false
}

func newAgent(t *testing.T, cfg agent.Config) *agent.Agent {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = persistence.NewMemory()
	}
	if cfg.Header.SessionID == "" {
		cfg.Header.SessionID = "s1"
	}
	a, err := agent.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func prompt(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

func wantStop(t *testing.T, res subagent.Result, want subagent.StopReason) {
	t.Helper()
	if res.StopReason != want {
		t.Fatalf("stop reason %q (detail %q), want %q", res.StopReason, res.Detail, want)
	}
}

// toolResults returns the tool messages of the last request, by call id.
func toolResults(t *testing.T, req agent.Request) map[string]agent.Message {
	t.Helper()
	out := map[string]agent.Message{}
	for _, m := range req.Messages {
		if m.Role == agent.ToolRole {
			out[m.ToolCallID] = m
		}
	}
	return out
}

func specNames(req agent.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

func TestNewRejectsBadConfig(t *testing.T) {
	model := &script{}
	tool := &fakeTool{name: "x"}
	for _, c := range []struct {
		field string
		cfg   agent.Config
	}{
		{"Store", agent.Config{Model: model, Header: subagent.SessionHeader{SessionID: "s"}}},
		{"Model", agent.Config{Store: persistence.NewMemory(), Header: subagent.SessionHeader{SessionID: "s"}}},
		{"Header.SessionID", agent.Config{Store: persistence.NewMemory(), Model: model}},
		{"MaxSteps", agent.Config{Store: persistence.NewMemory(), Model: model, Header: subagent.SessionHeader{SessionID: "s"}, MaxSteps: -1}},
		{"Tools", agent.Config{Store: persistence.NewMemory(), Model: model, Header: subagent.SessionHeader{SessionID: "s"}, Tools: []agent.Tool{tool, tool}}},
		{"Tools[0]", agent.Config{Store: persistence.NewMemory(), Model: model, Header: subagent.SessionHeader{SessionID: "s"}, Tools: []agent.Tool{nil}}},
		{"OutputSchema", agent.Config{Store: persistence.NewMemory(), Model: model, Header: subagent.SessionHeader{SessionID: "s"}, OutputSchema: json.RawMessage(`{"type":12}`)}},
		{"OutputSchema", agent.Config{Store: persistence.NewMemory(), Model: model, Header: subagent.SessionHeader{SessionID: "s"}, OutputSchema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}},
	} {
		_, err := agent.New(t.Context(), c.cfg)
		var ce *agent.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, agent.ErrConfig) {
			t.Errorf("field %s: got %v", c.field, err)
		}
	}
}

func TestNewCreatesSession(t *testing.T) {
	store := persistence.NewMemory()
	h := subagent.SessionHeader{SessionID: "child", ParentSessionID: "parent", DelegationDepth: 1}
	a := newAgent(t, agent.Config{Store: store, Model: &script{}, Header: h, Options: subagent.AgentOptions{SubagentDepth: 2}})
	got, _, err := store.Load(t.Context(), "child")
	if err != nil || got != h {
		t.Fatalf("stored header %+v, %v", got, err)
	}
	if a.ID() != "child" || a.SessionID() != "child" || a.Header() != h || subagent.DelegationDepthOf(a) != 2 {
		t.Fatalf("agent identity: id %q header %+v depth %d", a.ID(), a.Header(), subagent.DelegationDepthOf(a))
	}
	_, err = agent.New(t.Context(), agent.Config{Store: store, Model: &script{}, Header: h})
	if !errors.Is(err, persistence.ErrExists) {
		t.Fatalf("second New on the same id: got %v, want ErrExists", err)
	}
}

func TestOptionsAreCopies(t *testing.T) {
	maxDepth := 3
	a := newAgent(t, agent.Config{Model: &script{}, Options: subagent.AgentOptions{MaxDepth: &maxDepth}})
	maxDepth = 9
	*a.Options().MaxDepth = 7
	if got := *a.Options().MaxDepth; got != 3 {
		t.Fatalf("MaxDepth changed through an alias: %d", got)
	}
}

func TestFinalAnswerAndSteps(t *testing.T) {
	var steps []agent.Step
	model := &script{steps: []func(agent.Request) agent.Response{
		func(agent.Request) agent.Response {
			return agent.Response{
				Message: agent.Message{ToolCalls: []agent.ToolCall{tc("c1", "count", "{ \"path\": \"a/x.go\" }")}},
				Usage:   subagent.Usage{InputTokens: 10, OutputTokens: 2},
			}
		},
		func(agent.Request) agent.Response {
			return agent.Response{
				Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("done\nsecond line")}},
				Usage:   subagent.Usage{InputTokens: 20, OutputTokens: 5},
			}
		},
	}}
	store := persistence.NewMemory()
	a := newAgent(t, agent.Config{
		Store: store, Model: model, System: "be brief",
		Options: subagent.AgentOptions{MaxTokens: 99},
		Tools:   []agent.Tool{&fakeTool{name: "count"}},
		OnStep:  func(s agent.Step) { steps = append(steps, s) },
	})
	res := a.Run(testkit.Ctx(t), prompt("go"), nil)
	wantStop(t, res, subagent.Completed)
	if subagent.TextOf(res.Output) != "done\nsecond line" || res.Structured != nil {
		t.Fatalf("result %+v", res)
	}
	if res.Usage == nil || *res.Usage != (subagent.Usage{InputTokens: 30, OutputTokens: 7}) {
		t.Fatalf("usage %+v", res.Usage)
	}
	wantSteps := []agent.Step{
		{Agent: "s1", N: 1, Kind: subagent.ModelCallStarted},
		{Agent: "s1", N: 1, Kind: subagent.ModelCallFinished, Usage: &subagent.Usage{InputTokens: 10, OutputTokens: 2}},
		{Agent: "s1", N: 1, Kind: subagent.ToolCallStarted, Text: `count {"path":"a/x.go"}`},
		{Agent: "s1", N: 1, Kind: subagent.ToolCallFinished, Text: "count"},
		{Agent: "s1", N: 2, Kind: subagent.ModelCallStarted},
		{Agent: "s1", N: 2, Kind: subagent.ModelCallFinished, Usage: &subagent.Usage{InputTokens: 20, OutputTokens: 5}},
		{Agent: "s1", N: 2, Kind: subagent.MessageText, Text: "done\nsecond line"},
	}
	if !reflect.DeepEqual(steps, wantSteps) {
		t.Fatalf("steps\n got %+v\nwant %+v", steps, wantSteps)
	}
	reqs := model.requests()
	if reqs[0].System != "be brief" || reqs[0].MaxTokens != 99 || !reflect.DeepEqual(specNames(reqs[0]), []string{"count"}) {
		t.Fatalf("first request %+v", reqs[0])
	}
	if got := toolResults(t, reqs[1])["c1"]; got.IsError || subagent.TextOf(got.Content) != "count ok" {
		t.Fatalf("tool result %+v", got)
	}

	// Every turn is in the store, in order, and matches Turns.
	turns := a.Turns()
	if roles := rolesOf(turns); roles != "user assistant tool assistant" {
		t.Fatalf("turn roles %q", roles)
	}
	_, recs, err := store.Load(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	// The final turn's append also says how the run stopped.
	var stop agentlog.Stop
	if last := recs[len(recs)-1]; last.Kind != agentlog.KindStop || json.Unmarshal(last.Data, &stop) != nil ||
		stop.StopReason != subagent.Completed || stop.Usage == nil || stop.Usage.InputTokens != 30 {
		t.Fatalf("last record %s %s, want how the run stopped", last.Kind, last.Data)
	}
	recs = messageRecords(recs)
	if len(recs) != len(turns) {
		t.Fatalf("%d records for %d turns", len(recs), len(turns))
	}
	for i, r := range recs {
		var m agent.Message
		if r.Kind != persistence.KindMessage || json.Unmarshal(r.Data, &m) != nil || !reflect.DeepEqual(m, turns[i]) {
			t.Fatalf("record %d %s does not match turn %+v", i, r.Data, turns[i])
		}
	}
}

func rolesOf(msgs []agent.Message) string {
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role))
	}
	return strings.Join(roles, " ")
}

// Each tool waits until the other has started: sequential dispatch could
// never finish, so completing proves the calls run concurrently.
func TestToolsRunConcurrently(t *testing.T) {
	ctx := testkit.Ctx(t) // a deadlock fails instead of hanging
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	waitFor := func(self, other string) *fakeTool {
		return &fakeTool{name: self, call: func(ctx context.Context, _ *agent.Agent, _ json.RawMessage) (string, error) {
			close(started[self])
			select {
			case <-started[other]:
				return self + " saw " + other, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}}
	}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "b", `{}`), tc("2", "a", `{}`)),
		answer("ok"),
	}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{waitFor("a", "b"), waitFor("b", "a")}})
	wantStop(t, a.Run(ctx, prompt("go"), nil), subagent.Completed)
	msgs := model.requests()[1].Messages
	last2 := msgs[len(msgs)-2:]
	if last2[0].ToolCallID != "1" || subagent.TextOf(last2[0].Content) != "b saw a" ||
		last2[1].ToolCallID != "2" || subagent.TextOf(last2[1].Content) != "a saw b" {
		t.Fatalf("tool results out of call order or failed: %+v", last2)
	}
}

func TestToolErrorsBecomeErrorResults(t *testing.T) {
	tools := []agent.Tool{
		&fakeTool{name: "boom", call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
			panic("kaboom")
		}},
		&fakeTool{name: "fail", call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
			return "ignored", errors.New("disk on fire")
		}},
		&fakeTool{name: "fine"},
	}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "boom", `{}`), tc("2", "fail", `{}`), tc("3", "nope", `{}`), tc("4", "fine", `{}`)),
		answer("survived"),
	}}
	a := newAgent(t, agent.Config{Model: model, Tools: tools})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	got := toolResults(t, model.requests()[1])
	for id, want := range map[string]struct {
		isErr bool
		text  string
	}{
		"1": {true, "tool boom panicked: kaboom"},
		"2": {true, "disk on fire"},
		"3": {true, "unknown tool nope"},
		"4": {false, "fine ok"},
	} {
		if got[id].IsError != want.isErr || subagent.TextOf(got[id].Content) != want.text {
			t.Errorf("call %s: got %+v, want %+v", id, got[id], want)
		}
	}
}

func TestToolFilterAndConditionalToolsAreNotOffered(t *testing.T) {
	ran := make(chan string, 3)
	mk := func(name string) fakeTool {
		return fakeTool{name: name, call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
			ran <- name
			return "ran", nil
		}}
	}
	kept, denied := mk("kept"), mk("denied")
	hidden := &hiddenTool{fakeTool: mk("hidden"), asked: make(chan *agent.Agent, 2)}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "denied", `{}`), tc("2", "hidden", `{}`), tc("3", "kept", `{}`)),
		answer("ok"),
	}}
	a := newAgent(t, agent.Config{
		Model:      model,
		Tools:      []agent.Tool{&kept, &denied, hidden},
		ToolFilter: &subagent.ToolFilter{Deny: []string{"denied"}},
	})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	reqs := model.requests()
	if names := specNames(reqs[0]); !reflect.DeepEqual(names, []string{"kept"}) {
		t.Fatalf("offered tools %v, want [kept]", names)
	}
	if got := testkit.Recv(t, hidden.asked, "the conditional tool's Available call"); got != a {
		t.Fatalf("Available got %p, want the agent %p", got, a)
	}
	got := toolResults(t, reqs[1])
	if subagent.TextOf(got["1"].Content) != "unknown tool denied" || subagent.TextOf(got["2"].Content) != "unknown tool hidden" {
		t.Fatalf("results %+v", got)
	}
	close(ran)
	var names []string
	for n := range ran {
		names = append(names, n)
	}
	if !reflect.DeepEqual(names, []string{"kept"}) {
		t.Fatalf("tools that ran: %v", names)
	}
}

func TestCancelDuringModelCall(t *testing.T) {
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	entered := make(chan struct{})
	model := modelFunc(func(ctx context.Context, _ agent.Request) (agent.Response, error) {
		close(entered)
		<-ctx.Done()
		return agent.Response{}, ctx.Err()
	})
	a := newAgent(t, agent.Config{Model: model})
	done := make(chan subagent.Result, 1)
	go func() { done <- a.Run(ctx, prompt("go"), nil) }()
	testkit.Recv(t, entered, "the model call")
	cancel()
	res := testkit.Recv(t, done, "Run to return after the cancel")
	wantStop(t, res, subagent.Aborted)
	if !strings.Contains(res.Detail, "canceled") {
		t.Fatalf("detail %q", res.Detail)
	}
}

// blindStore ignores cancellation, as a store whose writes cannot be
// interrupted might.
type blindStore struct{ persistence.Store }

func (s blindStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	return s.Store.AppendAt(context.WithoutCancel(ctx), id, expect, recs...)
}

func TestCancelBetweenSteps(t *testing.T) {
	for name, store := range map[string]persistence.Store{
		// The results append fails on the ended context: still a cancel.
		"store honours ctx": persistence.NewMemory(),
		// The loop itself notices the ended context before the next step.
		"store ignores ctx": blindStore{persistence.NewMemory()},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(testkit.Ctx(t))
			stop := &fakeTool{name: "stop", call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
				cancel(errors.New("user pressed stop"))
				return "stopping", nil
			}}
			model := &script{steps: []func(agent.Request) agent.Response{call(tc("1", "stop", `{}`)), answer("never")}}
			a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{stop}})
			res := a.Run(ctx, prompt("go"), nil)
			wantStop(t, res, subagent.Aborted)
			if res.Detail != "user pressed stop" || len(model.requests()) != 1 {
				t.Fatalf("detail %q after %d model calls", res.Detail, len(model.requests()))
			}
		})
	}
}

func TestModelError(t *testing.T) {
	model := modelFunc(func(context.Context, agent.Request) (agent.Response, error) {
		return agent.Response{}, errors.New("rate limited")
	})
	res := newAgent(t, agent.Config{Model: model}).Run(testkit.Ctx(t), prompt("go"), nil)
	wantStop(t, res, subagent.Error)
	if !strings.Contains(res.Detail, "rate limited") {
		t.Fatalf("detail %q", res.Detail)
	}
}

// steerQueue hands out one batch per Take.
type steerQueue struct {
	batches [][][]subagent.ContentBlock
	err     error
}

func (q *steerQueue) Take(context.Context) ([][]subagent.ContentBlock, error) {
	if q.err != nil {
		return nil, q.err
	}
	if len(q.batches) == 0 {
		return nil, nil
	}
	b := q.batches[0]
	q.batches = q.batches[1:]
	return b, nil
}

func TestSteerMessagesJoinTheNextRequest(t *testing.T) {
	var steps []agent.Step
	steer := &steerQueue{batches: [][][]subagent.ContentBlock{
		nil,
		{prompt("also check b"), prompt("and c\nplease")},
	}}
	model := &script{steps: []func(agent.Request) agent.Response{call(tc("1", "t", `{}`)), answer("ok")}}
	store := &countingStore{Store: persistence.NewMemory()}
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{&fakeTool{name: "t"}}, OnStep: func(s agent.Step) {
		if s.Kind == subagent.SteerAdmitted {
			steps = append(steps, s)
		}
	}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), steer), subagent.Completed)
	reqs := model.requests()
	if rolesOf(reqs[0].Messages) != "user" {
		t.Fatalf("first request roles %q", rolesOf(reqs[0].Messages))
	}
	msgs := reqs[1].Messages
	if rolesOf(msgs) != "user assistant tool user user" ||
		subagent.TextOf(msgs[3].Content) != "also check b" || subagent.TextOf(msgs[4].Content) != "and c\nplease" {
		t.Fatalf("second request %+v", msgs)
	}
	want := []agent.Step{{Agent: "s1", N: 2, Kind: subagent.SteerAdmitted, Text: "also check b"}, {Agent: "s1", N: 2, Kind: subagent.SteerAdmitted, Text: "and c"}}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steer steps %+v", steps)
	}
	// Prompt, assistant, tool results, both steers at once, assistant: an
	// empty Take costs no store write.
	if store.appends != 5 {
		t.Fatalf("%d appends, want 5", store.appends)
	}
}

// countingStore counts the agent's appends (AppendAt); used from one
// goroutine.
type countingStore struct {
	persistence.Store
	appends int
}

func (s *countingStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	s.appends++
	return s.Store.AppendAt(ctx, id, expect, recs...)
}

func TestSteerErrorAborts(t *testing.T) {
	model := &script{}
	a := newAgent(t, agent.Config{Model: model})
	res := a.Run(testkit.Ctx(t), prompt("go"), &steerQueue{err: errors.New("steer closed")})
	wantStop(t, res, subagent.Aborted)
	if !strings.Contains(res.Detail, "steer closed") || len(model.requests()) != 0 {
		t.Fatalf("detail %q, %d model calls", res.Detail, len(model.requests()))
	}
}

const figuresSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// An answer that misses the output schema gets one corrective turn; a
// second miss settles error with the validation message.
func TestOutputSchema(t *testing.T) {
	for _, c := range []struct {
		name, answer, retry string
		stop                subagent.StopReason
		structured          string
		detail              string
	}{
		{"valid", " {\"n\": 3}\n", "", subagent.Completed, `{"n": 3}`, ""},
		{"mismatch", `{"n":"three"}`, `{"n":"still three"}`, subagent.Error, "", "does not match the output schema"},
		{"not JSON", `n is 3`, `still n is 3`, subagent.Error, "", "not JSON"},
		{"trailing text", `{"n":3} and more`, `{"n":3} and more`, subagent.Error, "", "not JSON"},
		{"corrected", `n is 3`, `{"n":3}`, subagent.Completed, `{"n":3}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			model := &script{steps: []func(agent.Request) agent.Response{answer(c.answer), answer(c.retry)}}
			a := newAgent(t, agent.Config{Model: model, OutputSchema: json.RawMessage(figuresSchema)})
			res := a.Run(testkit.Ctx(t), prompt("go"), nil)
			wantStop(t, res, c.stop)
			if string(res.Structured) != c.structured || !strings.Contains(res.Detail, c.detail) {
				t.Fatalf("structured %s detail %q", res.Structured, res.Detail)
			}
			if string(model.requests()[0].OutputSchema) != figuresSchema {
				t.Fatalf("request schema %s", model.requests()[0].OutputSchema)
			}
			if reqs := model.requests(); c.retry != "" {
				msgs := reqs[len(reqs)-1].Messages
				if len(reqs) != 2 || !strings.Contains(subagent.TextOf(msgs[len(msgs)-1].Content), "does not match the required JSON schema") {
					t.Fatalf("%d requests; the corrective turn was %+v", len(reqs), msgs[len(msgs)-1])
				}
			}
		})
	}
}

func TestModelStopReasonsEndTheRun(t *testing.T) {
	for _, reason := range []subagent.StopReason{subagent.MaxTokens, subagent.Refusal} {
		t.Run(string(reason), func(t *testing.T) {
			model := &script{steps: []func(agent.Request) agent.Response{func(agent.Request) agent.Response {
				return agent.Response{
					Message:    agent.Message{Content: prompt("partial"), ToolCalls: []agent.ToolCall{tc("1", "t", `{}`)}},
					StopReason: reason,
				}
			}}}
			ran := false
			tool := &fakeTool{name: "t", call: func(context.Context, *agent.Agent, json.RawMessage) (string, error) {
				ran = true
				return "", nil
			}}
			res := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{tool}}).Run(testkit.Ctx(t), prompt("go"), nil)
			wantStop(t, res, reason)
			if subagent.TextOf(res.Output) != "partial" || ran {
				t.Fatalf("output %q, tool ran: %v", subagent.TextOf(res.Output), ran)
			}
		})
	}
}

func TestStepLimit(t *testing.T) {
	loop := call(tc("1", "t", `{}`))
	model := &script{steps: []func(agent.Request) agent.Response{loop, loop, loop, loop}}
	steer := &steerQueue{batches: [][][]subagent.ContentBlock{nil, nil, nil, {prompt("never admitted")}}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{&fakeTool{name: "t"}}, MaxSteps: 3})
	res := a.Run(testkit.Ctx(t), prompt("go"), steer)
	wantStop(t, res, subagent.Error)
	if !strings.Contains(res.Detail, "step limit") || len(model.requests()) != 3 {
		t.Fatalf("detail %q after %d model calls", res.Detail, len(model.requests()))
	}
	if len(steer.batches) != 1 {
		t.Fatalf("a steer batch was taken with no request to carry it")
	}
}

// failingStore fails every append (AppendAt) after the first ok ones.
type failingStore struct {
	persistence.Store
	mu sync.Mutex
	ok int
}

func (s *failingStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok == 0 {
		return 0, errors.New("disk full")
	}
	s.ok--
	return s.Store.AppendAt(ctx, id, expect, recs...)
}

func TestStoreFailureEndsTheRun(t *testing.T) {
	for ok := range 3 { // fail on the prompt, the assistant turn, the tool results
		t.Run(fmt.Sprint(ok), func(t *testing.T) {
			store := &failingStore{Store: persistence.NewMemory(), ok: ok}
			model := &script{steps: []func(agent.Request) agent.Response{call(tc("1", "t", `{}`)), answer("ok")}}
			a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{&fakeTool{name: "t"}}})
			res := a.Run(testkit.Ctx(t), prompt("go"), nil)
			wantStop(t, res, subagent.Error)
			if !strings.Contains(res.Detail, "persist") || !strings.Contains(res.Detail, "disk full") {
				t.Fatalf("detail %q", res.Detail)
			}
			// The history never runs ahead of the store: the next run's
			// request holds what was acknowledged (the last case's
			// assistant turn with its calls answered as interrupted).
			store.mu.Lock()
			store.ok = 10
			store.mu.Unlock()
			again := &script{steps: []func(agent.Request) agent.Response{answer("ok")}}
			b := newAgent(t, agent.Config{Store: store, Header: a.Header(), Resume: true, Model: again})
			wantStop(t, b.Run(testkit.Ctx(t), prompt("again"), nil), subagent.Completed)
			if got, want := rolesOf(again.requests()[0].Messages), []string{"user", "user user", "user assistant tool user"}[ok]; got != want {
				t.Fatalf("history after the failure %q, want %q", got, want)
			}
		})
	}
}

func TestTurnsExcludeTheTurnInFlight(t *testing.T) {
	var seen []agent.Message
	peek := &fakeTool{name: "peek", call: func(_ context.Context, caller *agent.Agent, _ json.RawMessage) (string, error) {
		seen = caller.Turns()
		return "peeked", nil
	}}
	model := &script{steps: []func(agent.Request) agent.Response{call(tc("1", "peek", `{}`)), answer("ok")}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{peek}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	// Contract P2: the turn in flight (its prompt, the call running) is
	// not a completed turn.
	if rolesOf(seen) != "" {
		t.Fatalf("turns seen by a running tool: %q", rolesOf(seen))
	}
	if rolesOf(a.Turns()) != "user assistant tool assistant" {
		t.Fatalf("turns once the turn completed: %q", rolesOf(a.Turns()))
	}
	turns := a.Turns()
	turns[0].Content[0].Text = "changed"
	if subagent.TextOf(a.Turns()[0].Content) != "go" {
		t.Fatal("Turns shares memory with the history")
	}
}

func TestRunIsNotReentrant(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	model := modelFunc(func(context.Context, agent.Request) (agent.Response, error) {
		close(entered)
		<-release
		return agent.Response{Message: agent.Message{Content: prompt("ok")}}, nil
	})
	a := newAgent(t, agent.Config{Model: model})
	done := make(chan subagent.Result, 1)
	ctx := testkit.Ctx(t)
	go func() { done <- a.Run(ctx, prompt("go"), nil) }()
	testkit.Recv(t, entered, "the first Run's model call")
	res := a.Run(testkit.Ctx(t), prompt("again"), nil)
	close(release)
	wantStop(t, res, subagent.Error)
	wantStop(t, testkit.Recv(t, done, "the first Run to return"), subagent.Completed)
}

func TestResumeContinuesStoredHistory(t *testing.T) {
	store := persistence.NewMemory()
	h := subagent.SessionHeader{SessionID: "s1", ParentSessionID: "p", DelegationDepth: 2}
	first := &script{steps: []func(agent.Request) agent.Response{answer("one")}}
	a := newAgent(t, agent.Config{Store: store, Header: h, Model: first})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("first"), nil), subagent.Completed)
	// A log-only record must not become a turn.
	if err := store.Append(t.Context(), "s1", persistence.Record{Kind: "subagent/descriptor", Data: json.RawMessage(`{"version":1}`)}); err != nil {
		t.Fatal(err)
	}

	second := &script{steps: []func(agent.Request) agent.Response{answer("two")}}
	b := newAgent(t, agent.Config{Store: store, Header: subagent.SessionHeader{SessionID: "s1"}, Resume: true, Model: second})
	if b.Header() != h {
		t.Fatalf("resumed header %+v, want %+v", b.Header(), h)
	}
	if !reflect.DeepEqual(b.Turns(), a.Turns()) {
		t.Fatalf("resumed turns %+v, want %+v", b.Turns(), a.Turns())
	}
	wantStop(t, b.Run(testkit.Ctx(t), prompt("second"), nil), subagent.Completed)
	msgs := second.requests()[0].Messages
	if rolesOf(msgs) != "user assistant user" || subagent.TextOf(msgs[1].Content) != "one" || subagent.TextOf(msgs[2].Content) != "second" {
		t.Fatalf("resumed request %+v", msgs)
	}
}

func TestResumeAnswersInterruptedToolCalls(t *testing.T) {
	store := persistence.NewMemory()
	if err := store.Create(t.Context(), subagent.SessionHeader{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []agent.Message{
		{Role: agent.User, Content: prompt("go")},
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{tc("c1", "slow", `{}`)}},
	} {
		data, _ := json.Marshal(m)
		if err := store.Append(t.Context(), "s1", persistence.Record{Kind: persistence.KindMessage, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	model := &script{steps: []func(agent.Request) agent.Response{answer("ok")}}
	a := newAgent(t, agent.Config{Store: store, Header: subagent.SessionHeader{SessionID: "s1"}, Resume: true, Model: model})
	if rolesOf(a.Turns()) != "" {
		t.Fatalf("dangling tool call counted as a completed turn: %q", rolesOf(a.Turns()))
	}
	wantStop(t, a.Run(testkit.Ctx(t), prompt("again"), nil), subagent.Completed)
	msgs := model.requests()[0].Messages
	if rolesOf(msgs) != "user assistant tool user" || msgs[2].ToolCallID != "c1" || !msgs[2].IsError ||
		!strings.Contains(subagent.TextOf(msgs[2].Content), "interrupted") {
		t.Fatalf("request %+v", msgs)
	}
}

// TestK3_ResumeRejectsCorruptRecords: a stored payload is hostile input.
// Contract K3.
func TestK3_ResumeRejectsCorruptRecords(t *testing.T) {
	for name, data := range map[string]string{
		"not a message": `[1,2]`,
		"unknown role":  `{"role":"system"}`,
	} {
		t.Run(name, func(t *testing.T) {
			store := persistence.NewMemory()
			if err := store.Create(t.Context(), subagent.SessionHeader{SessionID: "s1"}); err != nil {
				t.Fatal(err)
			}
			if err := store.Append(t.Context(), "s1", persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(data)}); err != nil {
				t.Fatal(err)
			}
			_, err := agent.New(t.Context(), agent.Config{Store: store, Header: subagent.SessionHeader{SessionID: "s1"}, Resume: true, Model: &script{}})
			if err == nil || !strings.Contains(err.Error(), "record 0") {
				t.Fatalf("got %v", err)
			}
		})
	}
	_, err := agent.New(t.Context(), agent.Config{Store: persistence.NewMemory(), Header: subagent.SessionHeader{SessionID: "gone"}, Resume: true, Model: &script{}})
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("resume of a missing session: %v", err)
	}
}

// TestK3_MalformedToolArguments: tool-call arguments are model output. Bad
// JSON never reaches the tool and does not break the session log.
// Contract K3.
func TestK3_MalformedToolArguments(t *testing.T) {
	got := make(chan string, 2)
	tool := &fakeTool{name: "t", call: func(_ context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
		got <- string(args)
		return "ok", nil
	}}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "t", `{"path":`), tc("2", "t", ``)),
		answer("done"),
	}}
	store := persistence.NewMemory()
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{tool}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	close(got)
	var calls []string
	for g := range got {
		calls = append(calls, g)
	}
	if !reflect.DeepEqual(calls, []string{`{}`}) {
		t.Fatalf("tool saw %q, want only the empty call as {}", calls)
	}
	req := model.requests()[1]
	res := toolResults(t, req)
	if !res["1"].IsError || !strings.Contains(subagent.TextOf(res["1"].Content), "not valid JSON") || res["2"].IsError {
		t.Fatalf("results %+v", res)
	}
	if args := string(req.Messages[1].ToolCalls[0].Args); args != `"{\"path\":"` {
		t.Fatalf("malformed args kept as %s", args)
	}
	b := newAgent(t, agent.Config{Store: store, Header: subagent.SessionHeader{SessionID: "s1"}, Resume: true, Model: &script{}})
	if !reflect.DeepEqual(b.Turns(), a.Turns()) {
		t.Fatal("resumed history differs from the live one")
	}
}

// TestHistoryHoldsWhatTheStoreDecodes: the live history equals the decoded
// records, also for text JSON had to repair, so a resumed session sees
// exactly the turns a live one did.
func TestHistoryHoldsWhatTheStoreDecodes(t *testing.T) {
	store := persistence.NewMemory()
	for _, text := range []string{"plain <html> & ünïcode", "bad \xff\xfe bytes", ""} {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			id := fmt.Sprintf("s-%x", text)
			a, err := agent.New(t.Context(), agent.Config{Store: store, Model: modelFunc(func(context.Context, agent.Request) (agent.Response, error) {
				return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(text)}}}, nil
			}), Header: subagent.SessionHeader{SessionID: id}})
			if err != nil {
				t.Fatal(err)
			}
			a.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text(text)}, nil)
			_, recs, err := store.Load(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			recs = messageRecords(recs)
			turns := a.Turns()
			if len(recs) != len(turns) {
				t.Fatalf("%d records, %d turns", len(recs), len(turns))
			}
			for i, r := range recs {
				var m agent.Message
				if err := json.Unmarshal(r.Data, &m); err != nil || !reflect.DeepEqual(m, turns[i]) {
					t.Fatalf("turn %d: live %#v, stored %#v (%v)", i, turns[i], m, err)
				}
			}
		})
	}
}

// messageRecords keeps the model-visible records of a log.
func messageRecords(recs []persistence.Record) []persistence.Record {
	var out []persistence.Record
	for _, r := range recs {
		if r.Kind == persistence.KindMessage {
			out = append(out, r)
		}
	}
	return out
}

// E6: a model call the model retries is told as a ModelCallRetried step of
// the same call, between its start and its finish, so that a user sees
// why a step takes long.
func TestE6_ModelRetryIsAStep(t *testing.T) {
	var steps []agent.Step
	model := modelFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
		req.OnRetry(1, errors.New("openai: 503 Service Unavailable\nbody"), 2*time.Second)
		return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("ok")}}}, nil
	})
	a := newAgent(t, agent.Config{Model: model, OnStep: func(s agent.Step) { steps = append(steps, s) }})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	if len(steps) < 2 {
		t.Fatalf("steps %+v", steps)
	}
	want := agent.Step{Agent: a.ID(), N: 1, Kind: subagent.ModelCallRetried, Text: "attempt 1 failed, retrying in 2s: openai: 503 Service Unavailable", IsError: true}
	if !reflect.DeepEqual(steps[1], want) {
		t.Fatalf("second step %+v, want %+v", steps[1], want)
	}
}
