package subagent_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type agentAt struct {
	header, option int
	max            *int
}

func (a agentAt) ID() string        { return "a" }
func (a agentAt) SessionID() string { return "s" }
func (a agentAt) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: "s", DelegationDepth: a.header}
}
func (a agentAt) Options() subagent.AgentOptions {
	return subagent.AgentOptions{SubagentDepth: a.option, MaxDepth: a.max}
}

// Contract D6.
func TestD6_DelegationDepthIsTheLargerOfHeaderAndOption(t *testing.T) {
	for _, c := range []struct{ header, option, want int }{{0, 0, 0}, {2, 1, 2}, {1, 3, 3}} {
		if got := subagent.DelegationDepthOf(agentAt{header: c.header, option: c.option}); got != c.want {
			t.Errorf("DelegationDepthOf(header %d, option %d) = %d, want %d", c.header, c.option, got, c.want)
		}
	}
}

func TestToolFilterAllowAndDeny(t *testing.T) {
	var none *subagent.ToolFilter
	f := &subagent.ToolFilter{Allow: []string{"read", "list"}, Deny: []string{"list"}}
	for name, want := range map[string]bool{"read": true, "list": false, "count": false} {
		if f.Apply(name) != want || !none.Apply(name) {
			t.Errorf("Apply(%q) = %v", name, f.Apply(name))
		}
	}
	if deny := (&subagent.ToolFilter{Deny: []string{"x"}}); deny.Apply("x") || !deny.Apply("y") {
		t.Error("deny-only filter")
	}
}

// Contract S5.
func TestS5_CancelledMatchesBothTheServiceErrorAndTheCause(t *testing.T) {
	err := subagent.Cancelled(context.DeadlineExceeded)
	if !errors.Is(err, subagent.ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("Cancelled(DeadlineExceeded) = %v", err)
	}
}

func TestEventWireNames(t *testing.T) {
	for _, c := range []struct {
		ev   subagent.Event
		want string
	}{
		{subagent.ProviderAdded{}, "subagent/provider-added"},
		{subagent.ProviderRemoved{}, "subagent/provider-removed"},
		{subagent.RunStarted{}, "subagent/start"},
		{subagent.RunEnded{}, "subagent/end"},
	} {
		if subagent.TypeOf(c.ev) != c.want {
			t.Errorf("TypeOf(%T) = %q, want %q", c.ev, subagent.TypeOf(c.ev), c.want)
		}
	}
}
