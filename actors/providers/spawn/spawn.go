// Package spawn is the provider of fresh in-process children (P1): each
// Start creates a new session and agent whose parent is the delegating agent,
// and runs it under a run actor.
package spawn

import (
	"context"
	"errors"

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
	// OnStep, when set, receives every child's progress.
	OnStep func(agent.Step)
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
// before it returns (R1); on any failure, including ctx ending, nothing it
// created remains: no run actor, no goroutine, no session row (R6).
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
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
	cfg := agent.Config{
		Store: p.cfg.Store,
		Header: subagent.SessionHeader{
			SessionID:       uuid.NewString(),
			ParentSessionID: req.Parent.SessionID(),
			DelegationDepth: depth,
		},
		Model:        p.cfg.Model,
		Tools:        p.cfg.Tools,
		Options:      opts,
		OutputSchema: req.OutputSchema,
		ToolFilter:   req.ToolFilter,
		OnStep:       p.cfg.OnStep,
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
	h := run.Start(p.cfg.System, run.Spec{
		ID:    child.SessionID(),
		Agent: child,
		Ctx:   ctx,
		Body: func(ctx context.Context, steer *run.Gate) (subagent.Result, error) {
			return child.Run(ctx, req.Prompt, steer), nil
		},
	})
	if err := ctx.Err(); err != nil {
		// Roll back: the run quiesces first, so the child appends nothing
		// after its session is deleted.
		rollback := context.WithoutCancel(ctx)
		return nil, errors.Join(subagent.Cancelled(err), h.Dispose(rollback), p.cfg.Store.Delete(rollback, child.SessionID()))
	}
	h.Publish()
	return h, nil
}
