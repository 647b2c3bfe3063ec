package delegate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/agenttest"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

var allCaps = subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}

// advertised is the part of the parameter schema that carries limits.
type advertised struct {
	Properties struct {
		Description  struct{ MaxLength int }      `json:"description"`
		Prompt       struct{ MaxLength int }      `json:"prompt"`
		Persona      struct{ MaxLength int }      `json:"persona"`
		OutputSchema struct{ Description string } `json:"output_schema"`
		Tools        struct {
			Properties map[string]struct {
				MaxItems int
				Items    struct{ MaxLength int }
			} `json:"properties"`
		} `json:"tools"`
	} `json:"properties"`
}

// Contract K3: every model-facing string argument has a limit, and the
// parameter schema advertises it, the defaults and configured ones alike.
func TestK3_SchemaAdvertisesArgumentLimits(t *testing.T) {
	e := newEnv(t)
	e.register(t, newStub("all", allCaps))
	custom := delegate.Limits{Description: 11, Prompt: 1001, Persona: 501, OutputSchema: 2001, ToolNames: 5, ToolName: 17}
	for _, c := range []struct {
		limits, want delegate.Limits
	}{
		{delegate.Limits{}, delegate.Limits{
			Description: 200, Prompt: 64 << 10, Persona: 16 << 10, OutputSchema: 64 << 10, ToolNames: 64, ToolName: 128,
		}},
		{custom, custom},
		// Unset fields take their defaults.
		{delegate.Limits{Prompt: 7}, delegate.Limits{
			Description: 200, Prompt: 7, Persona: 16 << 10, OutputSchema: 64 << 10, ToolNames: 64, ToolName: 128,
		}},
	} {
		tool := newTool(t, e.svc, delegate.Config{Provider: "all", Limits: c.limits}, true)
		params := tool.Spec().Parameters
		var got advertised
		if err := json.Unmarshal(params, &got); err != nil {
			t.Fatal(err)
		}
		p := got.Properties
		allow, deny := p.Tools.Properties["allow"], p.Tools.Properties["deny"]
		if p.Description.MaxLength != c.want.Description || p.Prompt.MaxLength != c.want.Prompt ||
			p.Persona.MaxLength != c.want.Persona ||
			allow.MaxItems != c.want.ToolNames || deny.MaxItems != c.want.ToolNames ||
			allow.Items.MaxLength != c.want.ToolName || deny.Items.MaxLength != c.want.ToolName {
			t.Errorf("limits %+v: parameters %s, want %+v", c.limits, params, c.want)
		}
		// JSON Schema has no size keyword for an object: the description says it.
		if !strings.Contains(p.OutputSchema.Description, fmt.Sprintf("at most %d bytes", c.want.OutputSchema)) {
			t.Errorf("limits %+v: output_schema description %q does not give its limit", c.limits, p.OutputSchema.Description)
		}
	}
}

// objectSchema is a valid object schema of exactly n bytes.
func objectSchema(t *testing.T, n int) string {
	t.Helper()
	s := `{"type":"object","description":""}`
	if n < len(s) {
		t.Fatalf("no schema of %d bytes", n)
	}
	return `{"type":"object","description":"` + strings.Repeat("x", n-len(s)) + `"}`
}

// names is n distinct tool names of size runes each (multi-byte runes:
// limits count runes, as maxLength does).
func names(prefix string, n, size int) []string {
	out := make([]string, n)
	for i := range out {
		name := fmt.Sprintf("%s%d", prefix, i)
		out[i] = name + strings.Repeat("é", size-len(name))
	}
	return out
}

// Contract K3: an argument beyond its limit is refused with an error that
// says which argument, its size and the limit, before any provider is asked
// for a child; one at its limit is passed on.
func TestK3_ArgumentLimitsAreEnforcedBeforeAnyStart(t *testing.T) {
	e := newEnv(t)
	stub := newStub("all", allCaps)
	e.register(t, stub)
	caller := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, nil)
	l := delegate.Limits{Description: 10, Prompt: 100, Persona: 50, OutputSchema: 200, ToolNames: 3, ToolName: 8}
	tool := newTool(t, e.svc, delegate.Config{Provider: "all", Limits: l}, true)
	defaults := newTool(t, e.svc, delegate.Config{Provider: "all"}, true)

	// Strings of multi-byte runes: "é" is two bytes, one rune.
	runes := func(n int) string { return strings.Repeat("é", n) }
	args := func(fields map[string]any) json.RawMessage {
		m := map[string]any{"description": "d", "prompt": "p"}
		for k, v := range fields {
			m[k] = v
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	schemaOf := func(n int) json.RawMessage { return json.RawMessage(objectSchema(t, n)) }

	for _, c := range []struct {
		tool     *delegate.Tool
		fields   map[string]any
		argument string
		size     int
		limit    int
	}{
		{tool, map[string]any{"description": runes(11)}, "description", 11, 10},
		{tool, map[string]any{"prompt": runes(101)}, "prompt", 101, 100},
		{tool, map[string]any{"persona": runes(51)}, "persona", 51, 50},
		{tool, map[string]any{"output_schema": schemaOf(201)}, "output_schema", 201, 200},
		{tool, map[string]any{"tools": map[string]any{"allow": names("t", 4, 8)}}, "tools.allow", 4, 3},
		{tool, map[string]any{"tools": map[string]any{"deny": names("t", 4, 8)}}, "tools.deny", 4, 3},
		{tool, map[string]any{"tools": map[string]any{"deny": []string{"ok", runes(9)}}}, "tools.deny[1]", 9, 8},
		// The defaults: an 8 MiB description or prompt no longer gets through.
		{defaults, map[string]any{"description": strings.Repeat("x", 8<<20)}, "description", 8 << 20, 200},
		{defaults, map[string]any{"prompt": strings.Repeat("x", 8<<20)}, "prompt", 8 << 20, 64 << 10},
		{defaults, map[string]any{"persona": runes(16<<10 + 1)}, "persona", 16<<10 + 1, 16 << 10},
		{defaults, map[string]any{"output_schema": schemaOf(64<<10 + 1)}, "output_schema", 64<<10 + 1, 64 << 10},
		{defaults, map[string]any{"tools": map[string]any{"allow": names("t", 65, 3)}}, "tools.allow", 65, 64},
		{defaults, map[string]any{"tools": map[string]any{"allow": names("t", 1, 129)}}, "tools.allow[0]", 129, 128},
	} {
		out, err := c.tool.Call(testkit.Ctx(t), caller, args(c.fields))
		var lerr *delegate.LimitError
		if out != "" || !errors.Is(err, delegate.ErrArgs) || !errors.As(err, &lerr) {
			t.Errorf("%s of %d: got %q, %v; want a *LimitError", c.argument, c.size, out, err)
			continue
		}
		if lerr.Argument != c.argument || lerr.Size != c.size || lerr.Limit != c.limit {
			t.Errorf("%s of %d: got %+v, want size %d over %d", c.argument, c.size, lerr, c.size, c.limit)
		}
		// The model reads the message: the argument, its size and the limit.
		for _, want := range []string{c.argument, fmt.Sprint(c.size), fmt.Sprint(c.limit)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s of %d: message %q does not say %q", c.argument, c.size, err, want)
			}
		}
	}
	if n := len(stub.starts); n != 0 {
		t.Fatalf("over-limit arguments reached the provider %d times", n)
	}

	// At the limits, every argument reaches the provider (the stub then
	// refuses to start, which is not an argument error).
	for _, c := range []struct {
		tool   *delegate.Tool
		fields map[string]any
	}{
		{tool, map[string]any{
			"description": runes(10), "prompt": runes(100), "persona": runes(50),
			"output_schema": schemaOf(200),
			"tools":         map[string]any{"allow": names("a", 3, 8), "deny": names("d", 3, 8)},
		}},
		{defaults, map[string]any{
			"description": runes(200), "prompt": runes(64 << 10), "persona": runes(16 << 10),
			"output_schema": schemaOf(64 << 10),
			"tools":         map[string]any{"allow": names("a", 64, 128), "deny": names("d", 64, 128)},
		}},
	} {
		_, err := c.tool.Call(testkit.Ctx(t), caller, args(c.fields))
		if err == nil || errors.Is(err, delegate.ErrArgs) || errors.Is(err, subagent.ErrInvalidRequest) {
			t.Fatalf("arguments at their limits: %v; want them passed to the provider", err)
		}
		select {
		case <-stub.starts:
		default:
			t.Fatalf("arguments at their limits did not reach the provider: %v", err)
		}
	}
}

// Contract S4: a delegate call without a calling agent is an invalid
// request naming the parent, and neither panics nor starts anything.
func TestS4_NilCallerIsAnInvalidRequest(t *testing.T) {
	e := newEnv(t)
	stub := newStub("all", allCaps)
	e.register(t, stub)
	tool := newTool(t, e.svc, delegate.Config{Provider: "all"}, true)
	for _, raw := range []string{`{"description":"d","prompt":"p"}`, `{"description":"d","prompt":"p","delegation_levels":1}`, `garbage`} {
		out, err := tool.Call(testkit.Ctx(t), nil, json.RawMessage(raw))
		var ierr *subagent.InvalidRequestError
		if out != "" || !errors.As(err, &ierr) || ierr.Field != "parent" ||
			ierr.Reason != "a delegating parent agent is required" || !errors.Is(err, subagent.ErrInvalidRequest) {
			t.Fatalf("Call(nil caller, %s) = %q, %v", raw, out, err)
		}
	}
	if tool.Available(nil) {
		t.Fatal("the tool is available to no agent")
	}
	if n := len(stub.starts); n != 0 {
		t.Fatalf("a call without a caller reached the provider %d times", n)
	}
}

// Contract T1: a child that settles with any stop reason but completed, a
// provider-specific one included, reaches the model as an error naming the
// reason, never as an answer.
func TestT1_EveryNonCompletedStopReasonIsAnErrorResult(t *testing.T) {
	e := newEnv(t)
	// The child stops with the reason its task names: "stop <reason>".
	child := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		reason, _ := strings.CutPrefix(subagent.TextOf(req.Messages[0].Content), "stop ")
		return agent.Response{Message: agent.Message{Content: text("partial work")}, StopReason: subagent.StopReason(reason)}
	})
	e.spawnProvider(t, spawn.Config{Model: child})
	tool := newTool(t, e.svc, delegate.Config{Provider: spawn.DefaultName}, true)
	reasons := []subagent.StopReason{subagent.Aborted, subagent.Error, subagent.MaxTokens, subagent.Refusal, "timeout"}
	parentModel := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		// One delegation per reason, then a final answer.
		if calls := len(req.Messages) / 2; calls < len(reasons) {
			args := fmt.Sprintf(`{"description":"d","prompt":"stop %s"}`, reasons[calls])
			return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: fmt.Sprint("c", calls), Name: delegate.DefaultName, Args: json.RawMessage(args)}}}}
		}
		return final("ok")
	})
	parent := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, parentModel, tool)
	e.events(t, parent)

	for _, reason := range reasons {
		t.Run(string(reason), func(t *testing.T) {
			out, err := tool.Call(testkit.Ctx(t), parent, json.RawMessage(fmt.Sprintf(`{"description":"d","prompt":"stop %s"}`, reason)))
			if err == nil || out != "" {
				t.Fatalf("got %q, %v; want an error", out, err)
			}
			if !strings.Contains(err.Error(), "stopped: "+string(reason)) {
				t.Fatalf("error %q does not name the stop reason %q", err, reason)
			}
		})
	}

	// Through the agent loop each one is an error tool result, not an answer.
	if res := parent.Run(testkit.Ctx(t), text("delegate"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("parent: %+v", res)
	}
	reqs := parentModel.Requests("delegate")
	last := reqs[len(reqs)-1]
	seen := 0
	for _, m := range last.Messages {
		if m.Role != agent.ToolRole {
			continue
		}
		reason := reasons[seen]
		seen++
		if got := subagent.TextOf(m.Content); !m.IsError || !strings.Contains(got, string(reason)) || strings.Contains(got, `"kind"`) {
			t.Errorf("tool result for %q: error %v, %q; want an error naming it", reason, m.IsError, got)
		}
	}
	if seen != len(reasons) {
		t.Fatalf("%d tool results, want %d", seen, len(reasons))
	}
}
