// Package delegate is the model-facing delegate tool (T1), by default named
// "subagent", over one configured provider. Its parameter schema shows only
// what that provider's capabilities allow, and it follows the provider's
// registration through provider-added and provider-removed events, whatever
// order the two were set up in (E4).
package delegate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// Delegator is what the tool needs of the Service.
type Delegator interface {
	Start(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error)
	GetProvider(name string) (subagent.Provider, bool)
	Listen(l subagent.Listener) (release func())
}

// Defaults.
const (
	DefaultName     = "subagent"
	DefaultMaxDepth = 3
)

// Config configures a Tool.
type Config struct {
	Service  Delegator
	Provider string // the provider every delegation goes to
	Name     string // DefaultName when empty
	// MaxDepth caps delegation depth below the top-level agent;
	// DefaultMaxDepth when zero.
	MaxDepth int
}

// Tool delegates one task to a child and returns its answer.
type Tool struct {
	cfg     Config
	absent  agent.ToolSpec             // the spec while the provider is absent
	state   atomic.Pointer[registered] // nil while the provider is absent
	release func()
}

// registered is what the tool knows of its provider while it is there; the
// spec is built once per registration, not on every model request.
type registered struct {
	caps subagent.Capabilities
	spec agent.ToolSpec
}

// New returns a Tool that follows its provider's registration until Close.
// Service.Listen replays the current registrations before it returns, so
// the tool already knows whether its provider is there.
func New(cfg Config) *Tool {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	t := &Tool{cfg: cfg}
	t.absent = t.spec(subagent.Capabilities{})
	t.release = cfg.Service.Listen(t.follow)
	return t
}

// Close stops following the provider.
func (t *Tool) Close() { t.release() }

func (t *Tool) follow(ev subagent.Event) error {
	switch ev := ev.(type) {
	case subagent.ProviderAdded:
		if ev.Provider == t.cfg.Provider {
			if p, ok := t.cfg.Service.GetProvider(ev.Provider); ok {
				caps := p.Capabilities()
				t.state.Store(&registered{caps: caps, spec: t.spec(caps)})
			}
		}
	case subagent.ProviderRemoved:
		if ev.Name == t.cfg.Provider {
			t.state.Store(nil)
		}
	}
	return nil
}

// Available implements agent.Conditional: the tool is offered while its
// provider is registered and the agent is below its depth cap (D6).
func (t *Tool) Available(a *agent.Agent) bool {
	return t.current() != nil && subagent.CheckDepth(subagent.DelegationDepthOf(a), t.maxDepth(a)) == nil
}

// maxDepth is the tool's cap, tightened by one the agent inherited.
func (t *Tool) maxDepth(a subagent.Agent) int {
	m, _ := subagent.EffectiveMaxDepth(a, &t.cfg.MaxDepth)
	return m
}

// Spec implements agent.Tool.
func (t *Tool) Spec() agent.ToolSpec {
	if r := t.current(); r != nil {
		return r.spec
	}
	return t.absent
}

// current is what the tool knows of its provider: what its events built or,
// while they say absent, the registry's own answer. A provider registered
// after the tool was made is thus seen as soon as RegisterProvider returned,
// before its event has reached the tool.
func (t *Tool) current() *registered {
	if r := t.state.Load(); r != nil {
		return r
	}
	if p, ok := t.cfg.Service.GetProvider(t.cfg.Provider); ok {
		return &registered{caps: p.Capabilities(), spec: t.spec(p.Capabilities())}
	}
	return nil
}

// spec renders the parameters that caps allow.
func (t *Tool) spec(caps subagent.Capabilities) agent.ToolSpec {
	props := map[string]any{
		"description": map[string]any{"type": "string", "description": "A short description of the task (3-5 words)."},
		"prompt":      map[string]any{"type": "string", "description": "The complete task for the child agent; it sees nothing else of this conversation."},
	}
	if caps.OutputSchema {
		props["output_schema"] = map[string]any{"type": "object", "description": "A JSON Schema with an object root that the child's final answer must satisfy."}
	}
	if caps.DepthLimit {
		props["max_depth"] = map[string]any{"type": "integer", "minimum": 0, "description": "How deep the child may delegate further."}
	}
	if caps.ToolFilter {
		names := map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		props["tools"] = map[string]any{
			"type": "object", "description": "Restrict the child's tools by name.",
			"properties":           map[string]any{"allow": names, "deny": names},
			"additionalProperties": false,
		}
	}
	if caps.Persona {
		props["persona"] = map[string]any{"type": "string", "description": "The child's system prompt."}
	}
	params, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props,
		"required": []string{"description", "prompt"}, "additionalProperties": false,
	})
	return agent.ToolSpec{
		Name:        t.cfg.Name,
		Description: "Delegate a self-contained task to a child agent and wait for its answer.",
		Parameters:  params,
	}
}

// args are the tool's parameters as the model sends them: hostile input.
type args struct {
	Description  string               `json:"description"`
	Prompt       string               `json:"prompt"`
	OutputSchema json.RawMessage      `json:"output_schema,omitempty"`
	MaxDepth     *int                 `json:"max_depth,omitempty"`
	Tools        *subagent.ToolFilter `json:"tools,omitempty"`
	Persona      *string              `json:"persona,omitempty"`
}

// ErrArgs is matched by every argument error.
var ErrArgs = errors.New("delegate: invalid arguments")

// Answer is the tool's result for a foreground delegation.
type Answer struct {
	Kind       string          `json:"kind"` // "foreground"
	RunID      string          `json:"runId"`
	Output     string          `json:"output"`
	Structured json.RawMessage `json:"structured,omitempty"`
}

// Call implements agent.Tool: it starts the child, awaits its result,
// disposes it and answers. A non-completed stop reason is an error result.
func (t *Tool) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	r := t.current()
	if r == nil {
		return "", fmt.Errorf("%w: %q", subagent.ErrNoProvider, t.cfg.Provider)
	}
	caps := r.caps
	a, err := t.parse(raw, caps)
	if err != nil {
		return "", err
	}
	req := subagent.StartRequest{
		Prompt:       []subagent.ContentBlock{subagent.Text(a.Prompt)},
		Parent:       caller,
		OutputSchema: a.OutputSchema,
		ToolFilter:   a.Tools,
		Persona:      a.Persona,
	}
	if caps.DepthLimit {
		m := t.maxDepth(caller)
		if a.MaxDepth != nil {
			m = min(m, subagent.DelegationDepthOf(caller)+1+*a.MaxDepth)
		}
		req.MaxDepth = &m
	}
	run, err := t.cfg.Service.Start(ctx, t.cfg.Provider, req)
	if err != nil {
		return "", err
	}
	res, err := run.Wait(ctx)
	// The child's resources are gone before the parent sees the answer.
	if derr := run.Dispose(context.WithoutCancel(ctx)); err == nil {
		err = derr
	}
	if err != nil {
		return "", err
	}
	if res.StopReason != subagent.Completed {
		return "", fmt.Errorf("subagent %s stopped: %s: %s", run.ID(), res.StopReason, cmp.Or(res.Detail, subagent.TextOf(res.Output)))
	}
	out, err := json.Marshal(Answer{Kind: "foreground", RunID: run.ID(), Output: subagent.TextOf(res.Output), Structured: res.Structured})
	return string(out), err
}

// parse decodes the arguments strictly: unknown fields, wrong types and
// parameters the provider does not support are errors the model can read.
func (t *Tool) parse(raw json.RawMessage, caps subagent.Capabilities) (args, error) {
	var a args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("%w: %v", ErrArgs, err)
	}
	// More misses a stray '}' or ']'; only the end of input is clean.
	if _, err := dec.Token(); err != io.EOF {
		return a, fmt.Errorf("%w: trailing data after the arguments object", ErrArgs)
	}
	for _, p := range []struct {
		used, ok bool
		name     string
	}{
		{a.OutputSchema != nil, caps.OutputSchema, "output_schema"},
		{a.MaxDepth != nil, caps.DepthLimit, "max_depth"},
		{a.Tools != nil, caps.ToolFilter, "tools"},
		{a.Persona != nil, caps.Persona, "persona"},
	} {
		if p.used && !p.ok {
			return a, fmt.Errorf("%w: provider %q does not support %s", ErrArgs, t.cfg.Provider, p.name)
		}
	}
	switch {
	case strings.TrimSpace(a.Description) == "":
		return a, fmt.Errorf("%w: description is required", ErrArgs)
	case strings.TrimSpace(a.Prompt) == "":
		return a, fmt.Errorf("%w: prompt is required", ErrArgs)
	case a.MaxDepth != nil && *a.MaxDepth < 0:
		return a, fmt.Errorf("%w: max_depth must not be negative", ErrArgs)
	}
	return a, nil
}
