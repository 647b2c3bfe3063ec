package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// seam is subactor set up as an embedder would: one System, one Service,
// a spawn provider over model with in-memory sessions, and a delegating
// parent agent.
type seam struct {
	sys    *actors.System
	svc    *registry.Service
	store  persistence.Store
	parent *agent.Agent
	close  func()
}

func newSeam(ctx context.Context, model agent.Model, tools ...agent.Tool) (*seam, error) {
	return newSeamWith(ctx, spawn.Config{Model: model, Tools: tools})
}

// newSeamWith is newSeam with the spawn provider configured by cfg, on
// in-memory sessions unless cfg.Store is set.
func newSeamWith(ctx context.Context, cfg spawn.Config) (*seam, error) {
	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	svc := registry.New(sys)
	if cfg.Store == nil {
		cfg.Store = persistence.NewMemory()
	}
	s := &seam{sys: sys, svc: svc, store: cfg.Store, close: func() { svc.Close(); sys.Shutdown() }}
	cfg.System = sys
	provider, err := spawn.New(cfg)
	if err == nil {
		_, err = svc.RegisterProvider(provider)
	}
	if err == nil {
		s.parent, err = agent.New(ctx, agent.Config{Store: s.store, Model: cfg.Model, Header: subagent.SessionHeader{SessionID: "parent"}})
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *seam) start(ctx context.Context, prompt string) (subagent.Run, error) {
	return s.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: s.parent, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}})
}

// parked is a model that waits in Generate until its context ends: a child
// parked on its model call, the state most live children are in.
type parked struct{}

func (parked) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	<-ctx.Done()
	return agent.Response{}, ctx.Err()
}

// busy is a model that keeps calling the noop tool, so its child asks for a
// new request snapshot (and admits steers) at every step. It yields the
// processor once per call, as a real model call waiting on the network
// would; a child that never did would hold a core and time the scheduler.
type busy struct{}

func (busy) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	runtime.Gosched()
	return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: "n", Name: "noop", Args: []byte(`{}`)}}}}, ctx.Err()
}

type noop struct{}

func (noop) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "noop", Description: "does nothing", Parameters: []byte(`{"type":"object"}`)}
}
func (noop) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) { return "", nil }

// delegating is the parent's model of a parent run: it calls the delegate
// tool once with "echo hi", then answers with the tool's result as it
// came, as einoParentModel does with its tool's (a model's own work is no
// runtime's cost: neither side's model decodes anything).
type delegating struct{ child agent.Model }

func (d delegating) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	first := subagent.TextOf(req.Messages[0].Content)
	if first != "delegate" {
		return d.child.Generate(ctx, req)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != agent.ToolRole {
		return agent.Response{Message: agent.Message{ToolCalls: delegateCall}}, nil
	}
	if last.IsError {
		return agent.Response{}, fmt.Errorf("delegation failed: %s", subagent.TextOf(last.Content))
	}
	return agent.Response{Message: agent.Message{Content: last.Content}}, nil
}

// delegateCall is the parent's one tool call; the loop copies what it keeps.
var delegateCall = []agent.ToolCall{{
	ID: "c1", Name: delegate.DefaultName, Args: []byte(`{"description":"echo","prompt":"echo hi"}`),
}}

// delegated reports whether a parent run's answer is the delegate tool's
// for a child that answered "hi".
func delegated(out []subagent.ContentBlock) bool {
	return strings.Contains(subagent.TextOf(out), `"output":"hi"`)
}

// sessions mints distinct session ids for the parents of parent runs.
var sessions atomic.Int64

func nextSession() string { return "parent-" + strconv.FormatInt(sessions.Add(1), 10) }

// errAnswer is a child that answered what it should not have.
var errAnswer = errors.New("bench: unexpected answer")
