// The delegation-depth checks the Service, the
// providers and the delegate tool share (D6); subagent keeps the
// vocabulary callers use (DelegationDepthOf,
// ErrDepthExceeded).

package rules

import (
	"fmt"

	"github.com/subactor/subactor/subagent"
)

// DepthError reports a delegation beyond the cap; it wraps
// subagent.ErrDepthExceeded.
type DepthError struct{ Depth, Max int }

func (e *DepthError) Error() string {
	return fmt.Sprintf("subagent: delegation depth %d reached max depth %d", e.Depth, e.Max)
}
func (e *DepthError) Unwrap() error { return subagent.ErrDepthExceeded }

// CheckDepth reports whether an agent at depth d may delegate under max m:
// it may not when d >= m, a *DepthError.
func CheckDepth(d, m int) error {
	if d >= m {
		return &DepthError{Depth: d, Max: m}
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
