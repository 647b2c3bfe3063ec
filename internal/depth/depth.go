// Package depth holds the delegation-depth checks the Service, the
// providers and the delegate tool share (D6); subagent keeps the
// vocabulary callers use (DelegationDepthOf, AssertMaxDepth, DepthError).
package depth

import "github.com/subactor/subactor/subagent"

// Check reports whether an agent at depth d may delegate under max m:
// it may not when d >= m.
func Check(d, m int) error {
	if d >= m {
		return &subagent.DepthError{Depth: d, Max: m}
	}
	return nil
}

// EffectiveMax is the tighter of a requested cap and the one the agent
// inherited; ok is false when neither is set.
func EffectiveMax(a subagent.Agent, requested *int) (m int, ok bool) {
	inherited := a.Options().MaxDepth
	switch {
	case requested != nil && inherited != nil:
		return min(*requested, *inherited), true
	case requested != nil:
		return *requested, true
	case inherited != nil:
		return *inherited, true
	}
	return 0, false
}
