package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// quotingTool takes {"path": string} only and fails quoting its path, as
// file tools do.
type quotingTool struct{}

func (quotingTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "strict", Description: "test tool", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)}
}

func (quotingTool) Call(_ context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
	var a struct{ Path string }
	_ = json.Unmarshal(args, &a)
	return "", errors.New("no such file " + a.Path)
}

// Contract K3 (item 9 of issue 18): a tool call's huge argument (a path, a
// tool name, a property name of 4 MiB) is not echoed back whole: the error
// result and the tool-call-started progress carry a prefix of at most
// agent.EchoLimit bytes and say how much was left out.
func TestK3_ErrorsEchoABoundedPrefixOfTheArguments(t *testing.T) {
	huge := strings.Repeat("é", 2<<20) // 4 MiB, two bytes a rune
	calls := []agent.ToolCall{
		tc("1", "strict", `{"path":"`+huge+`"}`),
		tc("2", "strict", `{"`+huge+`":1}`),
		tc("3", "no-such-tool-"+huge, `{}`),
	}
	var mu sync.Mutex
	var started []string
	model := &script{steps: []func(agent.Request) agent.Response{call(calls...), answer("done")}}
	a := newAgent(t, agent.Config{Model: model, Tools: []agent.Tool{quotingTool{}}, OnStep: func(s agent.Step) {
		if s.Kind == subagent.ToolCallStarted {
			mu.Lock()
			started = append(started, s.Text)
			mu.Unlock()
		}
	}})
	wantStop(t, a.Run(testkit.Ctx(t), prompt("go"), nil), subagent.Completed)
	bounded := func(what, text, begins string) {
		t.Helper()
		if len(text) > agent.EchoLimit+2*len(" (4194304 more bytes)")+len(" ") || !strings.HasPrefix(text, begins) || !strings.Contains(text, "more bytes)") {
			t.Errorf("%s: %d bytes %.80q...", what, len(text), text)
		}
	}
	var results []agent.Message
	for _, m := range model.requests()[1].Messages {
		if m.Role == agent.ToolRole {
			results = append(results, m)
		}
	}
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(results), len(calls))
	}
	for i, begins := range []string{"no such file éé", "tool strict: ", "unknown tool no-such-tool-éé"} {
		if !results[i].IsError {
			t.Fatalf("result %d is no error: %.80q", i, subagent.TextOf(results[i].Content))
		}
		bounded("error result", subagent.TextOf(results[i].Content), begins)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 3 {
		t.Fatalf("%d tool-call-started events", len(started))
	}
	for _, text := range started {
		bounded("tool-call-started", text, "")
	}
}
