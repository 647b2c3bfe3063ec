package acp_test

import (
	"context"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/subagent/providertest"
)

// Contracts R1–R4, S5, R6: acp's runs of a real third-party agent (the
// ACP Go SDK's example agent, skipped where it is not installed, failed in
// CI), started through the Service, pass the provider conformance suite.
// Every turn of that agent asks permission for an edit and completes in
// about five seconds once answered; the waiting child is the same agent
// under a second acp provider whose policy answers only when the turn is
// cancelled (the harness starts the waiting request there).
func TestR1_ACPPassesTheProviderConformanceSuite(t *testing.T) {
	const waiting = "Please wait for my permission"
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		cfg := exampleConfig(t)
		svc := registry.New(cfg.System)
		t.Cleanup(svc.Close)
		quick := newProvider(t, cfg)
		cfg.Name = "acp-held"
		cfg.Permissions = func(ctx context.Context, _ acp.ToolCall) bool {
			<-ctx.Done()
			return false
		}
		held := newProvider(t, cfg)
		for _, p := range []subagent.Provider{quick, held} {
			release, err := svc.RegisterProvider(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(release)
		}
		return providertest.Harness{
			Provider: quick,
			Listen:   svc.ListenParent,
			Start: func(ctx context.Context, r subagent.StartRequest) (subagent.Run, error) {
				if subagent.TextOf(r.Prompt) == waiting {
					return svc.Start(ctx, held.Name(), r)
				}
				return svc.Start(ctx, quick.Name(), r)
			},
			Quick:   request("Please look around"),
			Waiting: request(waiting),
		}
	})
}
