package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// strictTool has a parameter schema with a required string "path".
type strictTool struct{ calls atomic.Int32 }

func (t *strictTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "read", Parameters: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string","maxLength":8}},"required":["path"],"additionalProperties":false}`)}
}

func (t *strictTool) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) {
	t.calls.Add(1)
	return "ok", nil
}

// Contract K3: tool-call arguments are validated against the tool's schema
// before it runs; invalid ones are an error result the model can correct.
func TestK3_ArgumentsAreValidatedAgainstTheToolsSchema(t *testing.T) {
	tool := &strictTool{}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "read", `{"path":5}`), tc("2", "read", `{}`), tc("3", "read", `{"path":"a","x":1}`), tc("4", "read", `{"path":"far too long"}`), tc("5", "read", `{"path":"ok.txt"}`)),
		answer("done"),
	}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{tool}})
	if res := a.Run(testkit.Ctx(t), prompt("go"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("run %+v", res)
	}
	if n := tool.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want only for the valid call", n)
	}
	results := model.requests()[1].Messages[2:]
	for i, r := range results[:4] {
		if text := subagent.TextOf(r.Content); !r.IsError || !strings.HasPrefix(text, "tool read: arguments do not match the tool's parameter schema: at ") {
			t.Fatalf("call %d: result %+v, want an error naming the tool and saying its arguments do not match", i+1, r)
		}
	}
	if results[4].IsError {
		t.Fatalf("the valid call failed: %+v", results[4])
	}
}

// Contracts K3, T1: arguments are read strictly before any tool runs: a
// key given twice (which a schema would judge by one of its values only),
// or in another case than the schema's, is an error result that says so.
func TestK3_RepeatedOrRecasedKeysAreErrorsTheModelSees(t *testing.T) {
	tool := &strictTool{}
	model := &script{steps: []func(agent.Request) agent.Response{
		call(tc("1", "read", `{"path":"a","path":"b"}`), tc("2", "read", `{"Path":"a"}`)),
		answer("done"),
	}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{tool}})
	if res := a.Run(testkit.Ctx(t), prompt("go"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("run %+v", res)
	}
	if n := tool.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	results := model.requests()[1].Messages[2:]
	for i, want := range []string{`key "path" is given twice at the top level`, `additional properties 'Path' not allowed`} {
		if text := subagent.TextOf(results[i].Content); !results[i].IsError || !strings.Contains(text, want) {
			t.Errorf("call %d: result %q, want an error saying %q", i+1, text, want)
		}
	}
}

// Contract F1: a turn's tool calls run concurrently up to the cap, and
// their results come back in call order.
func TestF1_ToolCallsRunConcurrentlyUpToTheCap(t *testing.T) {
	const calls, limit = 6, 2
	var inFlight, peak atomic.Int32
	entered := make(chan struct{}, calls)
	release := make(chan struct{})
	tool := &fakeTool{name: "slow", call: func(ctx context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		inFlight.Add(-1)
		return string(args), nil
	}}
	var tcs []agent.ToolCall
	for i := range calls {
		tcs = append(tcs, tc(fmt.Sprint(i), "slow", fmt.Sprintf(`{"n":%d}`, i)))
	}
	model := &script{steps: []func(agent.Request) agent.Response{call(tcs...), answer("done")}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{tool}, MaxParallelTools: limit})
	done := make(chan subagent.Result, 1)
	go func() { done <- a.Run(testkit.Ctx(t), prompt("go"), nil) }()
	testkit.Recv(t, entered, "the first call")
	testkit.Recv(t, entered, "the second call, beside the first")
	for i := 2; i < calls; i++ {
		release <- struct{}{}
		testkit.Recv(t, entered, fmt.Sprintf("call %d once a slot freed", i+1))
	}
	for range limit {
		release <- struct{}{}
	}
	if res := testkit.Recv(t, done, "the run"); res.StopReason != subagent.Completed {
		t.Fatalf("run %+v", res)
	}
	if p := peak.Load(); p != limit {
		t.Fatalf("peak concurrency %d, want the cap %d", p, limit)
	}
	results := model.requests()[1].Messages[2:]
	for i, r := range results {
		if r.ToolCallID != fmt.Sprint(i) || subagent.TextOf(r.Content) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("result %d is %+v: not in call order", i, r)
		}
	}
}
