package fork_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/fork"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/subagent/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// holding is the scripted model, except that a child whose task is "hold"
// waits in its model call until it is cancelled.
type holding struct{}

func (holding) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if len(req.Messages) > 0 && subagent.TextOf(req.Messages[len(req.Messages)-1].Content) == "hold" {
		<-ctx.Done()
		return agent.Response{}, context.Cause(ctx)
	}
	return scripted.New().Generate(ctx, req)
}

// Contracts R1–R4, S5, R6: fork's runs, started through the Service from
// an in-process parent with a completed turn, pass the provider
// conformance suite.
func TestR1_ForkPassesTheProviderConformanceSuite(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		sys := actors.NewSystem()
		t.Cleanup(sys.Shutdown)
		svc := registry.New(sys)
		t.Cleanup(svc.Close)
		store := persistence.NewMemory()
		p, err := fork.New(spawn.Config{System: sys, Store: store, Model: holding{}})
		if err != nil {
			t.Fatal(err)
		}
		release, err := svc.RegisterProvider(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		parent, err := agent.New(t.Context(), agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "parent"}})
		if err != nil {
			t.Fatal(err)
		}
		// A completed turn for the children to inherit.
		t.Cleanup(parent.Close)
		if res := parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("echo before")}, nil); res.StopReason != subagent.Completed {
			t.Fatalf("the parent's turn: %+v", res)
		}
		req := func(task string) subagent.StartRequest {
			return subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text(task)}}
		}
		return providertest.Harness{
			Provider: p,
			Listen:   svc.ListenParent,
			Start: func(ctx context.Context, r subagent.StartRequest) (subagent.Run, error) {
				return svc.Start(ctx, p.Name(), r)
			},
			Quick:   req("echo done"),
			Waiting: req("hold"),
		}
	})
}
