package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// loggedTurns decodes the model-visible records of a session.
func loggedTurns(t *testing.T, store persistence.Store, id string) []agent.Message {
	t.Helper()
	// As a resumed activation reads them: in the log's order, but for
	// each turn's tool results, in the order of its calls (F1).
	resumed, err := agent.New(t.Context(), agent.Config{Store: store, Header: subagent.SessionHeader{SessionID: id}, Resume: true, Model: &script{}})
	if err != nil {
		t.Fatal(err)
	}
	return resumed.Turns()
}

// The history shares no memory with the model's response, the tools'
// arguments, the caller's prompt or the result: whoever changes theirs
// afterwards changes neither the history nor what later requests carry.
func TestHistorySharesNoMemoryWithModelToolsCallerOrResult(t *testing.T) {
	store := persistence.NewMemory()
	calls := []agent.ToolCall{tc("1", "t", `{"path":"a"}`), tc("2", "t", ` { "path" : "b" } `)}
	content := []subagent.ContentBlock{subagent.Text("thinking")}
	final := []subagent.ContentBlock{subagent.Text("done"), subagent.Text("really")}
	model := &script{steps: []func(agent.Request) agent.Response{
		func(agent.Request) agent.Response {
			return agent.Response{Message: agent.Message{Content: content, ToolCalls: calls}}
		},
		func(agent.Request) agent.Response {
			return agent.Response{Message: agent.Message{Content: final}}
		},
	}}
	tool := &fakeTool{name: "t", call: func(_ context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
		got := string(args)
		for i := range args {
			args[i] = 'X' // a tool may scribble on its arguments
		}
		return got, nil
	}}
	p := prompt("go")
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{tool}})
	res := a.Run(testkit.Ctx(t), p, nil)
	wantStop(t, res, subagent.Completed)
	if subagent.TextOf(res.Output) != "done\nreally" {
		t.Fatalf("output %+v", res.Output)
	}
	// Everyone changes what they hold.
	calls[0].Args[2], calls[1].Name = 'Y', "changed"
	content[0].Text, final[0].Text, p[0].Text = "changed", "changed", "changed"
	res.Output[0].Text = "changed"
	res.Output = append(res.Output, subagent.Text("appended"))

	turns := a.Turns()
	if !reflect.DeepEqual(turns, loggedTurns(t, store, a.SessionID())) {
		t.Fatalf("history %+v differs from the log", turns)
	}
	if got := string(turns[1].ToolCalls[1].Args); got != `{"path":"b"}` {
		t.Fatalf("arguments in the history %s", got)
	}
	results := toolResults(t, model.requests()[1])
	if subagent.TextOf(results["1"].Content) != `{"path":"a"}` || subagent.TextOf(results["2"].Content) != `{"path":"b"}` {
		t.Fatalf("the tools saw %+v", results)
	}
	if subagent.TextOf(turns[0].Content) != "go" || subagent.TextOf(turns[1].Content) != "thinking" || subagent.TextOf(turns[4].Content) != "done\nreally" {
		t.Fatalf("history %+v", turns)
	}
}

// versionedTool's spec and availability change when told to.
type versionedTool struct {
	fakeTool
	version   atomic.Int32
	available atomic.Bool
}

func (t *versionedTool) Spec() agent.ToolSpec {
	s := t.fakeTool.Spec()
	s.Description = fmt.Sprintf("version %d", t.version.Load())
	return s
}

func (t *versionedTool) Available(*agent.Agent) bool { return t.available.Load() }

// Every request offers the tools as their specs and availability are at
// that step, whatever the previous request offered and whatever a model
// did to it.
func TestEveryRequestOffersTheToolsAsTheyAreNow(t *testing.T) {
	plain := &fakeTool{name: "plain"}
	v := &versionedTool{fakeTool: fakeTool{name: "v"}}
	v.available.Store(true)
	var steps []func(agent.Request) agent.Response
	changes := []func(){
		func() {},                           // as before
		func() { v.version.Add(1) },         // a new description
		func() { v.available.Store(false) }, // hidden
		func() {},                           // still hidden
		func() { v.available.Store(true) },  // back
		func() {},                           // as before, after a model changed its request
	}
	seen := make([][]agent.ToolSpec, len(changes)+1) // copies: requests share their tools
	for i := range changes {
		steps = append(steps, func(req agent.Request) agent.Response {
			seen[i] = append([]agent.ToolSpec(nil), req.Tools...)
			if i == 4 {
				req.Tools[0].Name = "scribbled" // a careless model
			}
			changes[i]()
			return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{tc(fmt.Sprint(i), "v", `{}`)}}}
		})
	}
	steps = append(steps, func(req agent.Request) agent.Response {
		seen[len(changes)] = append([]agent.ToolSpec(nil), req.Tools...)
		return answer("done")(req)
	})
	model := &script{steps: steps}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{plain, v}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	want := [][]agent.ToolSpec{
		{plain.Spec(), {Name: "v", Description: "version 0", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{plain.Spec(), {Name: "v", Description: "version 0", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{plain.Spec(), {Name: "v", Description: "version 1", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{plain.Spec()},
		{plain.Spec()},
		{plain.Spec(), {Name: "v", Description: "version 1", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{plain.Spec(), {Name: "v", Description: "version 1", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	for i, tools := range seen {
		if !reflect.DeepEqual(tools, want[i]) {
			t.Fatalf("request %d offered %+v, want %+v", i+1, tools, want[i])
		}
	}
	reqs := model.requests()
	// The call the model made while v was hidden found no tool; the others
	// found it, the careless model's too.
	for i := 1; i < len(reqs); i++ {
		res := toolResults(t, reqs[i])[fmt.Sprint(i-1)]
		hidden := i-1 == 3 || i-1 == 4
		if got := subagent.TextOf(res.Content); hidden != (got == "unknown tool v") || !hidden && got != "v ok" {
			t.Fatalf("call %d: result %q", i-1, got)
		}
	}
}

// Several turns in one append, large enough to outgrow the encoding
// buffer, land in the history as the log has them.
func TestALargeAppendMatchesTheLog(t *testing.T) {
	store := persistence.NewMemory()
	var calls []agent.ToolCall
	for i := range 40 {
		calls = append(calls, tc(fmt.Sprint(i), "echo", fmt.Sprintf(`{"text":%q}`, strings.Repeat("é<\u2028", 50*i))))
	}
	tool := &fakeTool{name: "echo", call: func(_ context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
		return strings.Repeat(string(args), 3) + "\xff", nil
	}}
	model := &script{steps: []func(agent.Request) agent.Response{call(calls...), answer("done")}}
	a := newAgent(t, agent.Config{Store: store, Model: model, Tools: []agent.Tool{tool}, MaxParallelTools: 3})
	wantStop(t, a.Run(testkit.Ctx(t), prompt(strings.Repeat("long prompt ", 2000)), nil), subagent.Completed)
	logged := loggedTurns(t, store, a.SessionID())
	turns := a.Turns()
	if len(turns) != 43 {
		t.Fatalf("%d turns", len(turns))
	}
	// Arguments JSON escapes differently in the log: compare the rest.
	for i := range turns {
		for j := range turns[i].ToolCalls {
			var live, stored any
			if json.Unmarshal(turns[i].ToolCalls[j].Args, &live) != nil || json.Unmarshal(logged[i].ToolCalls[j].Args, &stored) != nil || !reflect.DeepEqual(live, stored) {
				t.Fatalf("turn %d call %d: arguments %s, logged %s", i, j, turns[i].ToolCalls[j].Args, logged[i].ToolCalls[j].Args)
			}
			turns[i].ToolCalls[j].Args, logged[i].ToolCalls[j].Args = nil, nil
		}
	}
	if !reflect.DeepEqual(turns, logged) {
		t.Fatal("the history differs from the log")
	}
}

// Lifetime ends when the agent closes, whether it was asked for before or
// after.
func TestLifetimeEndsWithClose(t *testing.T) {
	before := newAgent(t, agent.Config{Model: &script{}})
	life := before.Lifetime()
	if life.Err() != nil || before.Lifetime() != life {
		t.Fatal("a lifetime ended before Close, or is not the same one")
	}
	before.Close()
	testkit.Recv(t, life.Done(), "the lifetime to end")
	after := newAgent(t, agent.Config{Model: &script{}, Header: subagent.SessionHeader{SessionID: "s2"}})
	after.Close()
	after.Close()
	for _, a := range []*agent.Agent{before, after} {
		if life := a.Lifetime(); !errors.Is(context.Cause(life), agent.ErrClosed) {
			t.Fatalf("lifetime ended with %v", context.Cause(life))
		}
		res := a.Run(testkit.Ctx(t), prompt("x"), nil)
		if res.StopReason != subagent.Aborted || !errors.Is(res.Cause, agent.ErrClosed) || res.Detail != agent.ErrClosed.Error() {
			t.Fatalf("run of a closed agent %+v", res)
		}
	}
}

// valueTool is a Tool whose values are not comparable.
type valueTool struct {
	name string
	run  func() string
}

func (t valueTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: t.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t valueTool) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) {
	return t.run(), nil
}

// Tools may be values of any type, comparable or not.
func TestToolsNeedNotBeComparable(t *testing.T) {
	tool := valueTool{name: "v", run: func() string { return "ran" }}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "v", `{}`)), call(tc("2", "v", `{}`)), answer("done"),
	}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{tool, valueTool{name: "w", run: tool.run}}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	for i, req := range model.requests()[1:] {
		if got := subagent.TextOf(toolResults(t, req)[fmt.Sprint(i+1)].Content); got != "ran" {
			t.Fatalf("call %d: %q", i+1, got)
		}
	}
}
