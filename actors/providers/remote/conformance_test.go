package remote_test

import (
	"context"
	"testing"

	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/subagent/providertest"
)

// Contracts R1–R4, S5, R6: the remote provider's runs, placed through the
// Service on a node hosting the echo provider (one node placing on
// itself over its own remote address: one node per process, see
// clustertest), pass the provider conformance suite.
func TestR1_RemotePassesTheProviderConformanceSuite(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		svc, _ := service(t, "echo", 4)
		p, _ := svc.GetProvider("echo")
		req := func(prompt string) subagent.StartRequest {
			return subagent.StartRequest{Parent: parent{}, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}}
		}
		return providertest.Harness{
			Provider: p,
			Listen:   svc.ListenParent,
			Start: func(ctx context.Context, r subagent.StartRequest) (subagent.Run, error) {
				return svc.Start(ctx, "echo", r)
			},
			Quick:   req("hello"),
			Waiting: req("wait"),
			Ignore:  clustertest.Leftovers,
		}
	})
}
