package spawn_test

import (
	"context"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/subagent/providertest"
)

// holding is the scripted model, except that a child whose task is "hold"
// waits in its model call until it is cancelled.
type holding struct{}

func (holding) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if len(req.Messages) > 0 && subagent.TextOf(req.Messages[0].Content) == "hold" {
		<-ctx.Done()
		return agent.Response{}, context.Cause(ctx)
	}
	return scripted.New().Generate(ctx, req)
}

// Contracts R1–R4, S5, R6: spawn's runs, started through the Service,
// pass the provider conformance suite.
func TestR1_SpawnPassesTheProviderConformanceSuite(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		e := newEnv(t)
		p := e.register(t, spawn.Config{Model: holding{}})
		parent := e.parent(t, "parent", 0, subagent.AgentOptions{})
		req := func(task string) subagent.StartRequest {
			return subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text(task)}}
		}
		return providertest.Harness{
			Provider: p,
			Listen:   e.svc.ListenParent,
			Start: func(ctx context.Context, r subagent.StartRequest) (subagent.Run, error) {
				return e.svc.Start(ctx, p.Name(), r)
			},
			Quick:   req("echo done"),
			Waiting: req("hold"),
		}
	})
}
