// Package delegate is the model-facing delegate tool (T1), by default named
// "subagent", over one configured provider. Its parameter schema shows only
// what that provider's capabilities allow, and it follows the provider's
// registration through provider-added and provider-removed events, whatever
// order the two were set up in (E4).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package delegate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Delegator is what the tool needs of the Service.
type Delegator interface {
	Start(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error)
	GetProvider(name string) (subagent.Provider, bool)
	Listen(l subagent.Listener, opts ...registry.ListenOption) subagent.Subscription
}

// Defaults.
const (
	DefaultName     = "subagent"
	DefaultMaxDepth = 3
)

// defaultLimits are the limits of a Limits field of zero or less.
var defaultLimits = Limits{
	Description:  200,
	Prompt:       64 << 10,
	Persona:      16 << 10,
	OutputSchema: 64 << 10,
	ToolNames:    64,
	ToolName:     128,
}

// Config configures a Tool.
type Config struct {
	Service  Delegator
	Provider string // the provider every delegation goes to
	Name     string // DefaultName when empty
	// MaxDepth is the absolute delegation cap, counted from the top-level
	// agent (depth 0): an agent at depth d is offered the tool only while
	// d < MaxDepth, so children run at most MaxDepth levels below the top.
	// DefaultMaxDepth when zero. The model's delegation_levels argument,
	// which counts from the child, can only tighten it.
	MaxDepth int
	// Limits bound the model-supplied arguments; zero fields take the
	// defaults.
	Limits Limits
	// Tasks, when set, offers background delegation (T1): with
	// run_in_background the child runs as a task of the calling agent and
	// the tool answers at once with its id, for task_output and task_kill
	// (package tools/tasks). A background child lives until it finishes,
	// is killed, or its parent agent closes.
	Tasks *tasks.Manager
	// Store, when set, is the store the provider keeps its children's
	// sessions in: with it, a foreground delegation that an earlier
	// process left without a result is recovered from its child's log
	// (see Recover).
	Store persistence.Store
}

// Limits bound the delegate tool's model-supplied arguments (K3). They are
// advertised in the parameter schema, and arguments beyond them are refused
// with an error matching ErrArgs that names the argument, its size and
// its limit, before any provider is asked for a child. String
// lengths count runes (Unicode code points), which is what the schema's
// maxLength means; the output schema, a JSON object, is measured in bytes
// of its JSON text as the model sent it. A field of zero or less takes its
// default, given after it.
type Limits struct {
	Description  int // runes of description; 200
	Prompt       int // runes of prompt; 64Ki
	Persona      int // runes of persona; 16Ki
	OutputSchema int // bytes of output_schema; 64KiB
	ToolNames    int // names in each of tools.allow and tools.deny; 64
	ToolName     int // runes of each of those names; 128
}

// withDefaults fills the unset limits.
func (l Limits) withDefaults() Limits {
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.Description, defaultLimits.Description)
	set(&l.Prompt, defaultLimits.Prompt)
	set(&l.Persona, defaultLimits.Persona)
	set(&l.OutputSchema, defaultLimits.OutputSchema)
	set(&l.ToolNames, defaultLimits.ToolNames)
	set(&l.ToolName, defaultLimits.ToolName)
	return l
}

// Tool delegates one task to a child and returns its answer.
type Tool struct {
	cfg    Config
	absent agent.ToolSpec             // the spec while the provider is absent
	state  atomic.Pointer[registered] // nil while the provider is absent
	sub    subagent.Subscription
}

// registered is what the tool knows of its provider while it is there; the
// spec is built once per registration, not on every model request.
type registered struct {
	caps subagent.Capabilities
	// continuable: the Service can start continuable children and the
	// provider can resume them (T1: the schema shows only what works).
	continuable bool
	spec        agent.ToolSpec
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
	cfg.Limits = cfg.Limits.withDefaults()
	t := &Tool{cfg: cfg}
	t.absent = t.spec(subagent.Capabilities{}, false)
	t.sub = cfg.Service.Listen(t.follow, registry.OnlyEvents(subagent.TypeOf(subagent.ProviderAdded{}), subagent.TypeOf(subagent.ProviderRemoved{})))
	return t
}

// Close stops following the provider.
func (t *Tool) Close() { t.sub.Release() }

func (t *Tool) follow(ev subagent.Event) error {
	switch ev := ev.(type) {
	case subagent.ProviderAdded:
		if ev.Provider == t.cfg.Provider {
			if p, ok := t.cfg.Service.GetProvider(ev.Provider); ok {
				t.state.Store(t.registered(p))
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
	return a != nil && t.current() != nil && rules.CheckDepth(subagent.DelegationDepthOf(a), t.maxDepth(a)) == nil
}

// maxDepth is the tool's cap, tightened by one the agent inherited.
func (t *Tool) maxDepth(a subagent.Agent) int {
	m, _ := rules.EffectiveMax(a, &t.cfg.MaxDepth)
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
		return t.registered(p)
	}
	return nil
}

// registered is what the tool offers over p.
func (t *Tool) registered(p subagent.Provider) *registered {
	_, resumes := p.(subagent.Resumer)
	c := t.continuer()
	r := &registered{caps: p.Capabilities(), continuable: t.cfg.Tasks != nil && resumes && c != nil && c.CanContinue()}
	r.spec = t.spec(r.caps, r.continuable)
	return r
}

// spec renders the parameters that caps (and continuable) allow, with
// their limits.
func (t *Tool) spec(caps subagent.Capabilities, continuable bool) agent.ToolSpec {
	l := t.cfg.Limits
	str := func(limit int, desc string) map[string]any {
		return map[string]any{"type": "string", "maxLength": limit, "description": desc}
	}
	props := map[string]any{
		"description": str(l.Description, "A short description of the task (3-5 words)."),
		"prompt":      str(l.Prompt, "The complete task for the child agent; it sees nothing else of this conversation."),
	}
	if caps.OutputSchema {
		props["output_schema"] = map[string]any{"type": "object", "description": fmt.Sprintf(
			"A JSON Schema with an object root that the child's final answer must satisfy; at most %d bytes of JSON.", l.OutputSchema)}
	}
	if caps.DepthLimit {
		props["delegation_levels"] = map[string]any{"type": "integer", "minimum": 0, "description": "How many further levels the child may delegate below itself; 0 means the child may not delegate."}
	}
	if caps.ToolFilter {
		names := map[string]any{
			"type": "array", "maxItems": l.ToolNames,
			"items": map[string]any{"type": "string", "maxLength": l.ToolName},
		}
		props["tools"] = map[string]any{
			"type": "object", "description": "Restrict the child's tools by name.",
			"properties":           map[string]any{"allow": names, "deny": names},
			"additionalProperties": false,
		}
	}
	if caps.Persona {
		props["persona"] = str(l.Persona, "The child's system prompt.")
	}
	description := "Delegate a self-contained task to a child agent and wait for its answer."
	if t.cfg.Tasks != nil {
		props["run_in_background"] = map[string]any{"type": "boolean", "description": "Answer at once with a task id instead of waiting; read the result with task_output, stop it with task_kill."}
		description = "Delegate a self-contained task to a child agent and wait for its answer, or run it in the background."
		if continuable {
			props["continuable"] = map[string]any{"type": "boolean", "description": "Keep the child for follow-ups with send_message (its subagentId); runs it in the background."}
		}
	}
	params, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props,
		"required": []string{"description", "prompt"}, "additionalProperties": false,
	})
	return agent.ToolSpec{Name: t.cfg.Name, Description: description, Parameters: params}
}

// args are the tool's parameters as the model sends them: hostile input.
type args struct {
	Description  string               `json:"description"`
	Prompt       string               `json:"prompt"`
	OutputSchema json.RawMessage      `json:"output_schema,omitempty"`
	Levels       *int                 `json:"delegation_levels,omitempty"`
	Tools        *subagent.ToolFilter `json:"tools,omitempty"`
	Persona      *string              `json:"persona,omitempty"`
	Background   bool                 `json:"run_in_background,omitempty"`
	Continuable  bool                 `json:"continuable,omitempty"`
}

// ErrArgs is matched by every argument error.
var ErrArgs = errors.New("delegate: invalid arguments")

// limitError is an argument beyond its limit (see Limits). It matches
// ErrArgs.
type limitError struct {
	Argument string // as the model names it: "prompt", "tools.allow[2]"
	Size     int    // the argument's size, in Unit
	Limit    int
	Unit     string // "characters" (runes), "bytes" or "names"
}

func (e *limitError) Error() string {
	return fmt.Sprintf("%v: %s has %d %s, over its limit of %d", ErrArgs, e.Argument, e.Size, e.Unit, e.Limit)
}

// Unwrap makes every *limitError match ErrArgs.
func (e *limitError) Unwrap() error { return ErrArgs }

// Answer is the tool's result for a foreground delegation.
type Answer struct {
	Kind       string          `json:"kind"`      // "foreground"
	RunID      string          `json:"runId"`     // the run's one id, as in its events
	SessionID  string          `json:"sessionId"` // the child's session
	Output     string          `json:"output"`
	Structured json.RawMessage `json:"structured,omitempty"`
}

// BackgroundAnswer is the tool's result for a background delegation.
type BackgroundAnswer struct {
	Kind      string `json:"kind"` // "background"
	TaskID    string `json:"taskId"`
	RunID     string `json:"runId"`
	SessionID string `json:"sessionId"`
	// SubagentID is a continuable child's durable id, for send_message.
	SubagentID string `json:"subagentId,omitempty"`
}

// continuer is a Delegator that can start continuable children (the
// registry's Service): CanContinue says whether it has what they need.
type continuer interface {
	StartContinuable(ctx context.Context, provider string, req subagent.StartRequest) (registry.Continuable, error)
	CanContinue() bool
}

func (t *Tool) continuer() continuer {
	c, _ := t.cfg.Service.(continuer)
	return c
}

// continuable starts a durable child whose first activation runs in the
// background; follow-ups go to it with send_message.
func (t *Tool) continuable(ctx context.Context, req subagent.StartRequest) (string, error) {
	c, err := t.continuer().StartContinuable(ctx, t.cfg.Provider, req)
	if err != nil {
		return "", err
	}
	out, err := jsonv2.Marshal(BackgroundAnswer{Kind: "background", TaskID: c.Task.ID, RunID: c.Task.RunID, SessionID: c.Task.SessionID, SubagentID: c.ChildID})
	return string(out), err
}

// Call implements agent.Tool: it starts the child, awaits its result,
// disposes it and answers. A non-completed stop reason is an error result.
func (t *Tool) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	if caller == nil {
		// The depth cap is read from the caller, before the Service could
		// reject a typed nil parent (S4).
		return "", &subagent.InvalidRequestError{Field: "parent", Reason: "a delegating parent agent is required"}
	}
	r := t.current()
	if r == nil {
		return "", fmt.Errorf("%w: %q", subagent.ErrNoProvider, t.cfg.Provider)
	}
	a, err := t.parse(raw, r)
	if err != nil {
		return "", err
	}
	req := t.request(caller, a, r.caps)
	if a.Continuable {
		return t.continuable(ctx, req)
	}
	if a.Background {
		return t.background(ctx, caller, req)
	}
	var run subagent.Run
	ref, named := agent.CallOf(ctx)
	if d, ok := t.cfg.Service.(durableService); ok && named {
		run, err = d.StartAs(ctx, t.cfg.Provider, req, childID(caller.SessionID(), ref))
	} else {
		run, err = t.cfg.Service.Start(ctx, t.cfg.Provider, req)
	}
	if err != nil {
		return "", err
	}
	return t.await(ctx, caller, run)
}

// request is the start request of a delegation with arguments a.
func (t *Tool) request(caller *agent.Agent, a args, caps subagent.Capabilities) subagent.StartRequest {
	req := subagent.StartRequest{
		Prompt:       []subagent.ContentBlock{subagent.Text(a.Prompt)},
		Parent:       caller,
		OutputSchema: a.OutputSchema,
		ToolFilter:   a.Tools,
		Persona:      a.Persona,
	}
	if caps.DepthLimit {
		m := t.maxDepth(caller)
		if a.Levels != nil {
			// delegation_levels counts from the child, at the caller's
			// depth plus one. Levels beyond m cannot loosen it, and
			// bounding them keeps the sum from overflowing.
			m = min(m, subagent.DelegationDepthOf(caller)+1+min(*a.Levels, max(m, 0)))
		}
		req.MaxDepth = &m
	}
	return req
}

// await waits for a foreground child, disposes it and answers with its
// result.
func (t *Tool) await(ctx context.Context, caller *agent.Agent, run subagent.Run) (string, error) {
	res, err := run.Wait(ctx)
	// The child's resources are gone before the parent sees the answer.
	if derr := run.Dispose(context.Background()); err == nil { // not cut short: its wait is short
		err = derr
	}
	if err != nil {
		return "", err
	}
	if res.Usage != nil {
		// What the child spent is the parent's too, whatever its outcome (U1).
		caller.AddUsage(*res.Usage)
	}
	return answer(run.ID(), run.SessionID(), res)
}

// answer is the tool's answer for a foreground child's result: a
// non-completed stop reason is an error result.
func answer(runID, sessionID string, res subagent.Result) (string, error) {
	if res.StopReason != subagent.Completed {
		return "", fmt.Errorf("subagent %s stopped: %s: %s", runID, res.StopReason, cmp.Or(res.Detail, subagent.TextOf(res.Output)))
	}
	return Answer{Kind: "foreground", RunID: runID, SessionID: sessionID, Output: subagent.TextOf(res.Output), Structured: res.Structured}.text()
}

// durableService is a Delegator that can name a child after the call that starts
// it and resume a stored child (the registry's Service): with it and
// Config.Store, a delegation survives its parent's process (S9).
type durableService interface {
	StartAs(ctx context.Context, name string, req subagent.StartRequest, runID string) (subagent.Run, error)
	Resume(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error)
}

// childNamespace is the UUID namespace of childID's names.
var childNamespace = uuid.MustParse("5d0c2b8e-6f1a-4c57-9a0e-1b7f3c9d2e41")

// childID is the session id of the child that the foreground delegation
// ref of session parentID starts: a name-based UUID (version 5) of the
// call, so that the call's record in the parent's log, written before
// its tools run, names its child before the child starts (S9), at no
// write of its own.
func childID(parentID string, ref agent.CallRef) string {
	return uuid.NewSHA1(childNamespace, fmt.Appendf(nil, "%s/%d/%d", parentID, ref.Seq, ref.Index)).String()
}

// Recover implements agent.Recoverer (S9): it answers a foreground
// delegation that an earlier process left without a result from the
// child the call named (childID). A child that finished gives its
// recorded result without running again; one that was running (or was
// aborted with its parent) is resumed from its own log through its
// provider, and that activation's result is the call's; only one that
// never started runs now. Depth, the call's context and the caller's
// parallel cap apply as in Call. A background delegation, or a tool
// without Config.Store or a durableService, answers
// agent.ErrInterrupted: its child is not the call's to wait for.
func (t *Tool) Recover(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	ref, named := agent.CallOf(ctx)
	d, durable := t.cfg.Service.(durableService)
	r := t.current()
	if caller == nil || !named || !durable || t.cfg.Store == nil || r == nil {
		return "", agent.ErrInterrupted
	}
	a, err := t.parse(raw, r)
	if err != nil {
		return "", err
	}
	if a.Background || a.Continuable {
		return "", agent.ErrInterrupted
	}
	id := childID(caller.SessionID(), ref)
	_, recs, err := t.cfg.Store.Load(ctx, id)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return t.Call(ctx, caller, raw)
	case err != nil:
		return "", err
	}
	if res, ok := stopped(recs); ok {
		if res.Usage != nil {
			caller.AddUsage(*res.Usage) // as Call would have (U1)
		}
		if res.StopReason == subagent.Completed && len(a.OutputSchema) > 0 {
			// The child's answer was checked against the schema when it
			// was given: this only reads it again.
			s, err := schema.Compile(a.OutputSchema)
			if err != nil {
				return "", err
			}
			if res.Structured, err = schema.Validate(s, subagent.TextOf(res.Output)); err != nil {
				return "", err
			}
		}
		return answer(id, id, res)
	}
	req := t.request(caller, a, r.caps)
	req.Prompt, req.Continuation = nil, &subagent.Continuation{SessionID: id}
	run, err := d.Resume(ctx, t.cfg.Provider, req)
	if err != nil {
		return "", err
	}
	return t.await(ctx, caller, run)
}

// stopped is the result a child's log records for its last activation,
// when that activation stopped other than aborted: its output is the
// stop record's or, for an in-process child, its last turn's. false when
// the last activation has no stop (it was running when the process died)
// or was aborted (with its parent): such a child is to be resumed.
func stopped(recs []persistence.Record) (subagent.Result, bool) {
	var last agent.Message
	var stop *agentlog.Stop
	for _, r := range recs {
		switch r.Kind {
		case persistence.KindMessage:
			last = agent.Message{}
			if json.Unmarshal(r.Data, &last) != nil {
				last = agent.Message{}
			}
		case agentlog.KindActivation:
			stop = nil
		case agentlog.KindStop:
			stop = new(agentlog.Stop)
			if json.Unmarshal(r.Data, stop) != nil {
				stop = nil
			}
		}
	}
	if stop == nil || stop.StopReason == subagent.Aborted {
		return subagent.Result{}, false
	}
	res := subagent.Result{StopReason: stop.StopReason, Detail: stop.Detail, Usage: stop.Usage, Output: stop.Output}
	if res.Output == nil && last.Role == agent.Assistant {
		res.Output = last.Content
	}
	return res, true
}

// text is a's JSON.
func (a Answer) text() (string, error) {
	b, err := jsonv2.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("delegate: the child's structured output is not JSON: %w", err)
	}
	return string(b), nil
}

// parse decodes the arguments strictly (T1, K3): a repeated, unknown or
// differently cased key, a null, a wrong type and a parameter the provider
// does not support are errors the model can read, matching ErrArgs (and,
// for the decoding faults, wrapping a *jsonv2.Error).
func (t *Tool) parse(raw json.RawMessage, r *registered) (args, error) {
	caps := r.caps
	var a args
	if err := jsonv2.Unmarshal(raw, &a); err != nil {
		return args{}, fmt.Errorf("%w: %w", ErrArgs, err)
	}
	for _, p := range []struct {
		used, ok bool
		name     string
	}{
		{a.OutputSchema != nil, caps.OutputSchema, "output_schema"},
		{a.Levels != nil, caps.DepthLimit, "delegation_levels"},
		{a.Tools != nil, caps.ToolFilter, "tools"},
		{a.Persona != nil, caps.Persona, "persona"},
		{a.Background, t.cfg.Tasks != nil, "run_in_background"},
		{a.Continuable, r.continuable, "continuable"},
	} {
		if p.used && !p.ok {
			return a, fmt.Errorf("%w: provider %q does not support %s", ErrArgs, t.cfg.Provider, p.name)
		}
	}
	if err := t.checkLimits(a); err != nil {
		return a, err
	}
	switch {
	case strings.TrimSpace(a.Description) == "":
		return a, fmt.Errorf("%w: description is required", ErrArgs)
	case strings.TrimSpace(a.Prompt) == "":
		return a, fmt.Errorf("%w: prompt is required", ErrArgs)
	case a.Levels != nil && *a.Levels < 0:
		return a, fmt.Errorf("%w: delegation_levels must not be negative", ErrArgs)
	}
	return a, nil
}

// checkLimits refuses an argument beyond its limit.
func (t *Tool) checkLimits(a args) error {
	l := t.cfg.Limits
	runes := func(name, s string, limit int) error {
		// A rune is at least one byte: most strings need no count.
		if len(s) <= limit {
			return nil
		}
		if n := utf8.RuneCountInString(s); n > limit {
			return &limitError{Argument: name, Size: n, Limit: limit, Unit: "characters"}
		}
		return nil
	}
	if err := runes("description", a.Description, l.Description); err != nil {
		return err
	}
	if err := runes("prompt", a.Prompt, l.Prompt); err != nil {
		return err
	}
	if a.Persona != nil {
		if err := runes("persona", *a.Persona, l.Persona); err != nil {
			return err
		}
	}
	if n := len(a.OutputSchema); n > l.OutputSchema {
		return &limitError{Argument: "output_schema", Size: n, Limit: l.OutputSchema, Unit: "bytes"}
	}
	if a.Tools != nil {
		for _, list := range []struct {
			name  string
			names []string
		}{{"tools.allow", a.Tools.Allow}, {"tools.deny", a.Tools.Deny}} {
			if n := len(list.names); n > l.ToolNames {
				return &limitError{Argument: list.name, Size: n, Limit: l.ToolNames, Unit: "names"}
			}
			for i, name := range list.names {
				if err := runes(fmt.Sprintf("%s[%d]", list.name, i), name, l.ToolName); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// background starts the child as a task of caller and answers at once.
// The child's context is the task's, not the call's: it outlives this
// turn (a kill or the call's end cancels only its start), and the Service
// ties it to the caller's lifetime.
func (t *Tool) background(ctx context.Context, caller *agent.Agent, req subagent.StartRequest) (string, error) {
	task, err := t.cfg.Tasks.Start(ctx, tasks.Spec{Parent: caller.SessionID(), Provider: t.cfg.Provider}, func(start context.Context) (subagent.Run, error) {
		return t.cfg.Service.Start(start, t.cfg.Provider, req)
	})
	if err != nil {
		return "", err
	}
	out, err := jsonv2.Marshal(BackgroundAnswer{Kind: "background", TaskID: task.ID, RunID: task.RunID, SessionID: task.SessionID})
	return string(out), err
}
