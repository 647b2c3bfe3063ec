// Package spawn is the provider of fresh in-process children (P1): each
// Start creates a new session and agent whose parent is the delegating agent,
// and runs it under a run actor. Its children are durable: their sessions
// carry a descriptor (D1), Resume continues one from its log (S6), and a
// crashed one continues from its log within the embedder's restart policy.
// With Config.Fork it is the fork provider (P2, package fork).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package spawn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// DefaultName is the name a spawn provider registers under by default.
const DefaultName = "spawn"

// Config configures a spawn provider.
type Config struct {
	Name   string // DefaultName when empty
	System *actors.System
	Store  persistence.Store
	// Model is the children's model when their options name none.
	Model agent.Model
	// Models, when set, gives the model for a child's chosen model
	// provider and model (its agent options, or its parent's when it
	// leaves them unset); a name it does not know is refused at Start.
	// openai.Endpoints is one.
	Models Models
	// Tools is the child's tool set before the request's tool filter. A
	// delegate tool among them hides itself at the child's depth cap.
	Tools []agent.Tool
	// Fork makes every child start with its parent's completed turns (the
	// fork provider, P2; see package fork).
	Fork bool
	// MaxSteps caps each child's model calls; the agent's default (64) when 0.
	MaxSteps int
}

// Models resolves a model provider and model named in agent options.
type Models interface {
	Lookup(provider, model string) (agent.Model, error)
}

// ErrConfig is returned by New for a missing dependency.
var ErrConfig = errors.New("spawn: invalid config")

// provider starts fresh in-process children. It declares every start-time
// capability, and implements subagent.Resumer and subagent.ModelChecker.
type provider struct {
	cfg   Config
	plain atomic.Pointer[plainDescriptor] // the last plain descriptor's record
}

// plainDescriptor is the descriptor record of a child with no persona and
// no tool filter on one model provider and model: most children's, and
// the same bytes each time, so encoded once (the store copies what it
// keeps, and nobody changes a record's data).
type plainDescriptor struct {
	agentProvider, agentModel string
	rec                       persistence.Record
}

// descriptorRecord is d's record, from the cache when d is plain.
func (p *provider) descriptorRecord(d descriptor.Descriptor) (persistence.Record, error) {
	plain := d.Persona == nil && d.ToolFilter == nil && d.ProviderData == nil
	if last := p.plain.Load(); plain && last != nil && last.agentProvider == d.AgentProvider && last.agentModel == d.AgentModel {
		return last.rec, nil
	}
	rec, err := d.Record()
	if err == nil && plain {
		p.plain.Store(&plainDescriptor{d.AgentProvider, d.AgentModel, rec})
	}
	return rec, err
}

var (
	_ subagent.Resumer      = (*provider)(nil)
	_ subagent.ModelChecker = (*provider)(nil)
)

// New returns a spawn provider. It is also a subagent.Resumer (S6) and a
// subagent.ModelChecker.
func New(cfg Config) (subagent.Provider, error) {
	if cfg.System == nil || cfg.Store == nil || cfg.Model == nil {
		return nil, errors.Join(ErrConfig, errors.New("spawn: System, Store and Model are required"))
	}
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	return &provider{cfg: cfg}, nil
}

// Name implements subagent.Provider.
func (p *provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider.
func (p *provider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// InheritsParentContext implements subagent.Provider: a spawned child starts
// from its prompt alone, a forked one from its parent's completed turns
// (P5).
func (p *provider) InheritsParentContext() bool { return p.cfg.Fork }

// Start implements subagent.Provider. The child's session and agent exist
// before it returns (R1); its session id is the run id from the request's
// scope (a fresh one when called without the Service), and the session
// starts with the child's descriptor (D1) and, for a fork, its parent's
// completed turns (P2), all created at once. On any failure, including ctx
// ending, nothing it created remains: no run actor, no goroutine, no
// session row (R6). A tool filter naming a tool the child does not have
// fails with an error matching subagent.ErrUnknownTool, naming the tools,
// before anything is created.
func (p *provider) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	if err := p.checkFilter(req.ToolFilter); err != nil {
		return nil, err
	}
	var seed []agent.Message
	if p.cfg.Fork {
		turns, ok := req.Parent.(interface{ Turns() []agent.Message })
		if !ok {
			return nil, &subagent.InvalidRequestError{Field: "parent", Reason: "a fork needs an in-process parent agent whose turns it can read"}
		}
		// Completed turns only: never the turn in flight, whose tool
		// calls (this delegation among them) have no results yet.
		seed = turns.Turns()
	}
	req.Options = inherit(req.Options, req.Parent.Options())
	if err := p.CheckModel(req.Options.ModelProvider, req.Options.Model); err != nil {
		return nil, err
	}
	d, err := descriptor.Snapshot(descriptor.Descriptor{
		Provider:      p.Name(),
		AgentProvider: req.Options.ModelProvider,
		AgentModel:    req.Options.Model,
		Persona:       req.Persona,
		ToolFilter:    req.ToolFilter,
	})
	if err != nil {
		return nil, err
	}
	rec, err := p.descriptorRecord(d)
	if err != nil {
		return nil, err
	}
	runID := runIDOf(scope)
	header := subagent.SessionHeader{
		SessionID:       runID,
		ParentSessionID: req.Parent.SessionID(),
		DelegationDepth: subagent.DelegationDepthOf(req.Parent) + 1,
	}
	// The prompt is created with the session, as its last seed turn: the
	// child then starts as a resumed one does, from its log, and the
	// store takes one write fewer.
	if len(req.Prompt) > 0 {
		seed = append(seed[:len(seed):len(seed)], agent.Message{Role: agent.User, Content: req.Prompt})
	}
	c := &child{runID: runID, sink: scope.Events}
	cfg, err := p.childConfig(req, header, d, c)
	if err != nil {
		return nil, err
	}
	cfg.Seed, cfg.LogOnly = seed, []persistence.Record{rec}
	// The session is stored with the child's first turn rather than a
	// write of its own: a delegating call records the child's id and
	// prompt in its parent's log before the child starts (S9), so a
	// child that stored nothing when the process died runs anew under
	// the same id, as one that never started does. Until then it is a
	// session to every reader of the store in this process (R1). A
	// continuable child's creation is stored at once: follow-ups resume
	// it from there (S7).
	cfg.Deferred = !scope.Continuable
	// New creates the session as its last step, so when it fails there is
	// no session to remove.
	if c.agent, err = agent.New(ctx, cfg); err != nil {
		return nil, err
	}
	return p.launch(ctx, scope, req, c, func(rollback context.Context) error {
		return p.cfg.Store.Delete(rollback, c.agent.SessionID())
	})
}

// Resume implements subagent.Resumer (S6): the child named by the
// continuation is rebuilt from its log with its earlier turns and its
// descriptor's configuration, and continues with the request's prompt (or
// as it stopped, when the prompt is empty). A child that was mid-turn when
// its process died continues from its last complete turn: tool calls
// without results get error results saying they were interrupted, and the
// model decides whether to call them again. The run's Output is only what
// this activation produced. Its session header's delegation depth stays
// authoritative: it may deepen, never become shallower (D5). The
// continuation's descriptor is folded from the child's own log when the
// caller passes none.
func (p *provider) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	c := req.Continuation
	if c == nil {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: "resume needs a continuation"}
	}
	header, err := p.cfg.Store.Header(ctx, c.SessionID)
	if err != nil {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: fmt.Sprintf("session %q: %v", c.SessionID, err), Fault: err}
	}
	d, err := p.descriptor(ctx, c)
	if err != nil {
		return nil, err
	}
	if d.Provider != p.Name() {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: fmt.Sprintf("the child was started by provider %q, not %q", d.Provider, p.Name())}
	}
	if err := p.checkFilter(d.ToolFilter); err != nil {
		return nil, err
	}
	// D5: the stored depth is a floor; the parent's may push it deeper.
	header.DelegationDepth = max(header.DelegationDepth, subagent.DelegationDepthOf(req.Parent)+1)
	runID := runIDOf(scope)
	req.Persona, req.ToolFilter = d.Persona, d.ToolFilter
	ch := &child{runID: runID, sink: scope.Events}
	cfg, err := p.childConfig(req, header, d, ch)
	if err != nil {
		return nil, err
	}
	// The prompt is logged as the child takes its log: once the run is
	// published, the message it carries is durable.
	cfg.Resume, cfg.Prompt = true, req.Prompt
	if ch.agent, err = agent.New(ctx, cfg); err != nil {
		return nil, err
	}
	// The session is durable: a resume that failed before the take left
	// it as it was, and one that took it is launched whatever ctx says.
	return p.launch(ctx, scope, req, ch, nil)
}

// descriptor is the continuation's descriptor, or the one in the child's
// log when the caller passed none.
func (p *provider) descriptor(ctx context.Context, c *subagent.Continuation) (descriptor.Descriptor, error) {
	if len(c.Descriptor) > 0 {
		return descriptor.Parse(c.Descriptor)
	}
	_, recs, err := p.cfg.Store.Load(ctx, c.SessionID)
	if err != nil {
		return descriptor.Descriptor{}, err
	}
	return descriptor.Fold(recs)
}

// childConfig is the child agent's configuration: the request's (or, on
// resume, the descriptor's) choices on the provider's model and tools at
// the header's depth, under the tighter of the depth caps (D6), telling c
// of its steps.
func (p *provider) childConfig(req subagent.StartRequest, h subagent.SessionHeader, d descriptor.Descriptor, c *child) (agent.Config, error) {
	opts := req.Options
	opts.ModelProvider, opts.Model = d.AgentProvider, d.AgentModel
	opts.SubagentDepth = h.DelegationDepth
	if m, ok := rules.EffectiveMax(req.Parent, req.MaxDepth); ok {
		// The Service checked this already; a direct caller gets the same
		// answer rather than a child beyond the cap (D6).
		if err := rules.CheckDepth(subagent.DelegationDepthOf(req.Parent), m); err != nil {
			return agent.Config{}, err
		}
		opts.MaxDepth = &m
	}
	model, err := p.model(d.AgentProvider, d.AgentModel)
	if err != nil {
		return agent.Config{}, err
	}
	cfg := agent.Config{
		Store:        p.cfg.Store,
		Header:       h,
		Model:        model,
		Tools:        p.cfg.Tools,
		Options:      opts,
		OutputSchema: req.OutputSchema,
		ToolFilter:   req.ToolFilter,
		OnStep:       c.onStep(),
		MaxSteps:     p.cfg.MaxSteps,
	}
	if req.Persona != nil {
		cfg.System = *req.Persona
	}
	return cfg, nil
}

// launch runs child under a run actor and publishes it. A fresh child
// (undo set) whose ctx or parent ended meanwhile is rolled back instead:
// the run quiesces first (so the child appends nothing more), then undo
// removes what the start created; a resumed one (undo nil) is published
// and settles aborted. After a crash the child continues from its log
// within the embedder's restart policy.
func (p *provider) launch(ctx context.Context, scope subagent.Scope, req subagent.StartRequest, c *child, undo func(context.Context) error) (subagent.Run, error) {
	scope.RunID = c.runID
	h := run.Start(p.cfg.System, run.Spec{
		Scope:        scope,
		SessionID:    c.agent.SessionID(),
		Agent:        c.agent,
		Ctx:          ctx,
		Child:        c,
		Relaunchable: true,
		// Nothing else of the provider's runs under ctx.
		Cancel: scope.Cancel,
	})
	// A resumed child took its log with its prompt: the activation exists
	// (the message it carries is delivered), so an ended ctx or parent
	// settles it aborted instead of failing the resume.
	if err := setupEnded(ctx, req.Parent); err != nil && undo != nil {
		rollback := context.WithoutCancel(ctx)
		return nil, errors.Join(err, h.Dispose(rollback), undo(rollback))
	}
	return h, nil
}

// runIDOf is the run id the Service minted, or a fresh one for a direct
// caller (minted only then: an id costs a random draw).
func runIDOf(scope subagent.Scope) string {
	if scope.RunID != "" {
		return scope.RunID
	}
	return ids.New()
}

// inherit fills the options a child leaves unset (model provider, model,
// max tokens) from its parent's (M1). A model is inherited only with the
// parent's provider: a child that picks another provider gets that
// endpoint's default model.
func inherit(child, parent subagent.AgentOptions) subagent.AgentOptions {
	if child.ModelProvider == "" {
		child.ModelProvider = parent.ModelProvider
		child.Model = cmp.Or(child.Model, parent.Model)
	}
	child.MaxTokens = cmp.Or(child.MaxTokens, parent.MaxTokens)
	return child
}

// CheckModel implements subagent.ModelChecker: a model provider or model
// the provider cannot serve is refused before any child exists.
func (p *provider) CheckModel(provider, model string) error {
	_, err := p.model(provider, model)
	return err
}

// model is the model for a child's chosen provider and model: the
// provider's default when it names none.
func (p *provider) model(provider, model string) (agent.Model, error) {
	if provider == "" && model == "" {
		return p.cfg.Model, nil
	}
	if p.cfg.Models == nil {
		return nil, &subagent.InvalidRequestError{Field: "options", Reason: fmt.Sprintf("provider %q has no model endpoints to choose %q/%q from", p.Name(), provider, model)}
	}
	m, err := p.cfg.Models.Lookup(provider, model)
	if err != nil {
		return nil, &subagent.InvalidRequestError{Field: "options", Reason: err.Error(), Fault: err}
	}
	return m, nil
}

// checkFilter rejects a filter that names a tool the child does not have:
// a typo there would otherwise leave the child silently without tools.
func (p *provider) checkFilter(f *subagent.ToolFilter) error {
	if f == nil {
		return nil
	}
	have := make(map[string]bool, len(p.cfg.Tools))
	for _, t := range p.cfg.Tools {
		have[t.Spec().Name] = true
	}
	var unknown []string
	for _, n := range slices.Concat(f.Allow, f.Deny) {
		if !have[n] && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: tool filter names tools the child does not have: %s", subagent.ErrUnknownTool, strings.Join(unknown, ", "))
	}
	return nil
}

// child is a spawned (or resumed) child as its run runs it: its agent and
// where its progress goes. It is the run's Child and its agent's OnStep in
// one allocation.
type child struct {
	agent *agent.Agent
	runID string
	sink  subagent.EventSink // nil: no progress events
}

// Run implements run.Child: the agent's loop under the run's context
// itself (the Gate owns it: see agent.Agent.Run), from where the log
// ends: its prompt is logged already (with the session, or as a resumed
// child took its log), and relaunched after a crash its history holds
// exactly what the log acknowledged, so the same agent continues there.
func (c *child) Run(g run.Gate) {
	exit := g.Exit()
	exit.Result = c.agent.Run(g.Context(), nil, g)
	confirm(exit)
}

// onStep is the child agent's OnStep: the run's progress events, nil when
// no sink takes them.
func (c *child) onStep() func(agent.Step) {
	if c.sink == nil {
		return nil
	}
	return c.progress
}

// progress turns the child loop's steps into the run's progress events.
func (c *child) progress(s agent.Step) {
	c.sink.Emit(subagent.RunProgress{RunID: c.runID, Kind: s.Kind, Step: s.N, Text: s.Text, IsError: s.IsError, Usage: s.Usage})
}

// confirm passes on a result whose turns the log acknowledged. One the
// log refused is an infrastructure fault, not a child's answer: the run
// settles with the error and without the unconfirmed output (R5).
func confirm(exit *run.Exit) {
	if res := &exit.Result; errors.Is(res.Cause, agent.ErrCheckpoint) {
		exit.Err = res.Cause
		*res = subagent.Result{StopReason: subagent.Error, Detail: res.Detail, Usage: res.Usage}
	}
}

// setupEnded reports why a start must roll back: its context ended, or its
// parent closed (checked directly too, since a context bound to the
// parent's lifetime learns of the close asynchronously).
func setupEnded(ctx context.Context, parent subagent.Agent) error {
	if err := rules.ParentClosed(parent); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return subagent.Cancelled(err)
	}
	return nil
}
