// Package subactor is the short path to embedding subactor: New wires an
// actor System, a registry.Service, a session store and a spawn provider
// with defaults, NewAgent makes a parent on them whose model can delegate
// through the "subagent" tool, and Delegate runs one child to its result.
// New reads no environment and no file: the model is Config.Models.Top
// when set (pass what openai.Select resolved to choose it as cmd/node
// does, from OPENAI_* and DEEPSEEK_API_KEY or a -models file), else
// Config.Model, else the embedded scripted model.
//
// Nothing is hidden: a Runtime's System, Service, Store and Provider are
// the same parts an advanced embedder composes by hand (see
// actors/registry's ExampleService), so a program can start on the short
// path and register more providers, listen to run events or steer runs
// through Runtime.Service when it needs to.
package subactor

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// Config configures a Runtime. Every field is optional.
type Config struct {
	// System is the actor runtime to run on; the caller keeps owning it.
	// When nil, New makes one and Close shuts it down. To run on a
	// protoactor system you already have, pass actors.Wrap(yours).
	System *actors.System
	// Store keeps every session; persistence.NewMemory() when nil.
	Store persistence.Store
	// Models is the model configuration openai.Select resolved: its Top
	// drives parents and children, children may name any of its
	// Endpoints, and parents' options name its default endpoint and model
	// for their children to inherit. When its Top is nil, Model applies.
	Models openai.Selection
	// Model drives parents and children when Models selects none; the
	// embedded scripted model (scripted.New()) when nil.
	Model agent.Model
	// Tools are the children's tools.
	Tools []agent.Tool
	// Provider is the name the spawn provider registers under;
	// spawn.DefaultName when empty.
	Provider string
	// Options configure the Service.
	Options []registry.Option
}

// Runtime is a System, a Service and a spawn provider registered on it,
// sharing one store and one model. Its methods are safe for concurrent use.
type Runtime struct {
	System  *actors.System
	Service *registry.Service
	Store   persistence.Store
	Model   agent.Model
	// Provider is the spawn provider registered on Service (also a
	// subagent.Resumer and a subagent.ModelChecker).
	Provider subagent.Provider

	// delegate is the parents' "subagent" tool over Provider.
	delegate *delegate.Tool
	// options are the parents' agent options: the default endpoint and
	// model of Config.Models.
	options    subagent.AgentOptions
	release    func()
	ownsSystem bool
	closeOnce  sync.Once
}

// New wires a Runtime from cfg. On error nothing it made is left running.
func New(cfg Config) (*Runtime, error) {
	r := &Runtime{
		System:     cfg.System,
		Store:      cfg.Store,
		Model:      cfg.Model,
		ownsSystem: cfg.System == nil,
	}
	if r.System == nil {
		r.System = actors.NewSystem()
	}
	if r.Store == nil {
		r.Store = persistence.NewMemory()
	}
	var endpoints spawn.Models // nil, not a nil map, without endpoints
	if m := cfg.Models; m.Top != nil {
		r.Model = m.Top
		r.options = subagent.AgentOptions{ModelProvider: m.Endpoint, Model: m.Model}
		if m.Endpoints != nil {
			endpoints = m.Endpoints
		}
	}
	if r.Model == nil {
		r.Model = scripted.New()
	}
	r.Service = registry.New(r.System, cfg.Options...)
	name := cmp.Or(cfg.Provider, spawn.DefaultName)
	p, err := spawn.New(spawn.Config{
		Name:   name,
		System: r.System, Store: r.Store, Model: r.Model, Models: endpoints, Tools: cfg.Tools,
	})
	if err == nil {
		r.Provider = p
		r.release, err = r.Service.RegisterProvider(p)
	}
	if err == nil {
		r.delegate = delegate.New(delegate.Config{Service: r.Service, Provider: name})
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// NewAgent creates a top-level agent (delegation depth 0) with a new
// session sessionID in the runtime's store, on its model, with tools and
// the "subagent" tool, with which its model delegates to a child of the
// runtime's provider: a parent. tools may not have one of that name. Config
// errors match agent.ErrConfig.
func (r *Runtime) NewAgent(ctx context.Context, sessionID string, tools ...agent.Tool) (*agent.Agent, error) {
	return agent.New(ctx, agent.Config{
		Store: r.Store, Model: r.Model, Tools: append(slices.Clip(tools), agent.Tool(r.delegate)),
		Header:  subagent.SessionHeader{SessionID: sessionID},
		Options: r.options,
	})
}

// Delegate is the one-call common case: it starts a child of parent on the
// runtime's provider with prompt, waits for its result and disposes it.
// The child's resources are gone when Delegate returns, whatever the
// outcome. The Service's typed errors come back as they are (a nil ctx
// matches subagent.ErrNilContext, a nil parent *subagent.InvalidRequestError).
// When ctx ends before the child completes, the error matches
// subagent.ErrCancelled and ctx's error. Otherwise a child that stopped
// short (max tokens, an error) is a Result with that StopReason, not an
// error.
func (r *Runtime) Delegate(ctx context.Context, parent subagent.Agent, prompt string) (subagent.Result, error) {
	run, err := r.Service.Start(ctx, r.Provider.Name(), subagent.StartRequest{
		Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text(prompt)},
	})
	if err != nil {
		return subagent.Result{}, err
	}
	res, err := run.Wait(ctx)
	if cerr := ctx.Err(); cerr != nil && (err != nil || res.StopReason != subagent.Completed) {
		// Wait may see ctx end or the child settle on it first; either
		// way the caller gets the same answer.
		if errors.Is(err, cerr) {
			err = nil // Wait's own report of ctx, said once below
		}
		res, err = subagent.Result{}, errors.Join(subagent.Cancelled(cerr), err)
	}
	// Not bounded by ctx: an ended ctx has cancelled the child, and
	// Dispose then returns once it has quiesced, so nothing outlives
	// the call.
	if derr := run.Dispose(context.WithoutCancel(ctx)); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return subagent.Result{}, err
	}
	return res, nil
}

// Close releases the provider's registration, closes the Service and, if
// New made the System, shuts it down; a System passed in Config stays up.
// Runs started through the Service and not yet disposed are the caller's
// to dispose, before Close. Close is idempotent.
func (r *Runtime) Close() {
	r.closeOnce.Do(func() {
		if r.delegate != nil {
			r.delegate.Close()
		}
		if r.release != nil {
			r.release()
		}
		r.Service.Close()
		if r.ownsSystem {
			r.System.Shutdown()
		}
	})
}
