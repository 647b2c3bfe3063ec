package rules_test

import (
	"errors"
	"testing"

	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/subagent"
)

type agentAt struct{ max *int }

func (a agentAt) ID() string        { return "a" }
func (a agentAt) SessionID() string { return "s" }
func (a agentAt) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: "s"}
}
func (a agentAt) Options() subagent.AgentOptions {
	return subagent.AgentOptions{MaxDepth: a.max}
}

// Contract D6.
func TestD6_AnAgentAtItsCapCannotDelegate(t *testing.T) {
	if err := rules.CheckDepth(2, 3); err != nil {
		t.Fatalf("depth 2 under max 3: %v", err)
	}
	err := rules.CheckDepth(3, 3)
	var d *rules.DepthError
	if !errors.As(err, &d) || d.Depth != 3 || d.Max != 3 || !errors.Is(err, subagent.ErrDepthExceeded) {
		t.Fatalf("depth 3 under max 3: %v", err)
	}
}

// Contract D6.
func TestD6_EffectiveMaxDepthIsTheTighterCap(t *testing.T) {
	two, five := 2, 5
	for _, c := range []struct {
		inherited, requested *int
		want                 int
		ok                   bool
	}{{nil, nil, 0, false}, {&five, nil, 5, true}, {nil, &two, 2, true}, {&two, &five, 2, true}, {&five, &two, 2, true}} {
		m, ok := rules.EffectiveMax(agentAt{max: c.inherited}, c.requested)
		if m != c.want || ok != c.ok {
			t.Errorf("EffectiveMax(%v, %v) = %d, %v", c.inherited, c.requested, m, ok)
		}
	}
}
