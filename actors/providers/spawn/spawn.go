// Package spawn is the provider of fresh in-process children (P1): each
// Start creates a new session and agent whose parent is the delegating agent,
// and runs it under a run actor.
package spawn

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/google/uuid"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// DefaultName is the name a spawn provider registers under by default.
const DefaultName = "spawn"

// Config configures a spawn Provider.
type Config struct {
	Name   string // DefaultName when empty
	System *actors.System
	Store  persistence.Store
	Model  agent.Model
	// Tools is the child's tool set before the request's tool filter. A
	// delegate tool among them hides itself at the child's depth cap.
	Tools []agent.Tool
	// MaxSteps caps each child's model calls; agent.DefaultMaxSteps when 0.
	MaxSteps int
}

// ErrConfig is returned by New for a missing dependency.
var ErrConfig = errors.New("spawn: invalid config")

// Provider starts fresh in-process children. It declares every start-time
// capability.
type Provider struct{ cfg Config }

// New returns a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.System == nil || cfg.Store == nil || cfg.Model == nil {
		return nil, errors.Join(ErrConfig, errors.New("spawn: System, Store and Model are required"))
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	return &Provider{cfg: cfg}, nil
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider.
func (p *Provider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// InheritsParentContext implements subagent.Provider: a spawned child starts
// from its prompt alone (P5).
func (p *Provider) InheritsParentContext() bool { return false }

// Start implements subagent.Provider. The child's session and agent exist
// before it returns (R1); its session id is the run id from the request's
// scope (a fresh one when called without the Service). On any failure,
// including ctx ending, nothing it created remains: no run actor, no
// goroutine, no session row (R6). A tool filter naming a tool the child
// does not have fails with *subagent.UnknownToolError before anything is
// created.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	if err := p.checkFilter(req.ToolFilter); err != nil {
		return nil, err
	}
	depth := subagent.DelegationDepthOf(req.Parent) + 1
	opts := req.Options
	opts.SubagentDepth = depth
	if m, ok := subagent.EffectiveMaxDepth(req.Parent, req.MaxDepth); ok {
		// The Service checked this already; a direct caller gets the same
		// answer rather than a child beyond the cap (D6).
		if err := subagent.CheckDepth(depth-1, m); err != nil {
			return nil, err
		}
		opts.MaxDepth = &m
	}
	runID := cmp.Or(req.Scope.RunID, uuid.NewString())
	cfg := agent.Config{
		Store: p.cfg.Store,
		Header: subagent.SessionHeader{
			SessionID:       runID,
			ParentSessionID: req.Parent.SessionID(),
			DelegationDepth: depth,
		},
		Model:        p.cfg.Model,
		Tools:        p.cfg.Tools,
		Options:      opts,
		OutputSchema: req.OutputSchema,
		ToolFilter:   req.ToolFilter,
		OnStep:       progress(runID, req.Scope.Events),
		MaxSteps:     p.cfg.MaxSteps,
	}
	if req.Persona != nil {
		cfg.System = *req.Persona
	}
	// New creates the session as its last step, so when it fails there is
	// no session to remove.
	child, err := agent.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	scope := req.Scope
	scope.RunID = runID
	h := run.Start(p.cfg.System, run.Spec{
		Scope:     scope,
		SessionID: child.SessionID(),
		Agent:     child,
		Ctx:       ctx,
		Body: func(ctx context.Context, steer *run.Gate) (subagent.Result, error) {
			return child.Run(ctx, req.Prompt, steer), nil
		},
	})
	if err := setupEnded(ctx, req.Parent); err != nil {
		// Roll back: the run quiesces first, so the child appends nothing
		// after its session is deleted.
		rollback := context.WithoutCancel(ctx)
		return nil, errors.Join(err, h.Dispose(rollback), p.cfg.Store.Delete(rollback, child.SessionID()))
	}
	h.Publish()
	return h, nil
}

// checkFilter rejects a filter that names a tool the child does not have:
// a typo there would otherwise leave the child silently without tools.
func (p *Provider) checkFilter(f *subagent.ToolFilter) error {
	if f == nil {
		return nil
	}
	have := make(map[string]bool, len(p.cfg.Tools))
	for _, t := range p.cfg.Tools {
		have[t.Spec().Name] = true
	}
	var unknown []string
	for _, n := range append(slices.Clone(f.Allow), f.Deny...) {
		if !have[n] && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return &subagent.UnknownToolError{Names: unknown}
	}
	return nil
}

// progress turns the child loop's steps into the run's progress events.
func progress(runID string, sink subagent.EventSink) func(agent.Step) {
	if sink == nil {
		return nil
	}
	return func(s agent.Step) {
		sink.Emit(subagent.RunProgress{RunID: runID, Kind: s.Kind, Step: s.N, Text: s.Text, IsError: s.IsError, Usage: s.Usage})
	}
}

// setupEnded reports why a start must roll back: its context ended, or its
// parent closed (checked directly too, since a context bound to the
// parent's lifetime learns of the close asynchronously).
func setupEnded(ctx context.Context, parent subagent.Agent) error {
	if err := subagent.ParentClosed(parent); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return subagent.Cancelled(err)
	}
	return nil
}
