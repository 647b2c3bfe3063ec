// Package depth holds the delegation-depth checks the Service, the
// providers and the delegate tool share (D6); subagent keeps the
// vocabulary callers use (DelegationDepthOf,
// ErrDepthExceeded).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package depth

import (
	"fmt"

	"github.com/subactor/subactor/subagent"
)

// Error reports a delegation beyond the cap; it wraps
// subagent.ErrDepthExceeded.
type Error struct{ Depth, Max int }

func (e *Error) Error() string {
	return fmt.Sprintf("subagent: delegation depth %d reached max depth %d", e.Depth, e.Max)
}
func (e *Error) Unwrap() error { return subagent.ErrDepthExceeded }

// Check reports whether an agent at depth d may delegate under max m:
// it may not when d >= m, an *Error.
func Check(d, m int) error {
	if d >= m {
		return &Error{Depth: d, Max: m}
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
