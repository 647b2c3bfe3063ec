package subagent

// DelegationDepthOf is an agent's delegation depth: the larger of its
// session header's depth and its option depth (D6). A top-level agent is 0.
func DelegationDepthOf(a Agent) int {
	return max(a.Header().DelegationDepth, a.Options().SubagentDepth)
}

// AssertMaxDepth checks that m is a valid max depth.
func AssertMaxDepth(m int) error {
	if m < 0 {
		return &InvalidRequestError{Field: "maxDepth", Reason: "must not be negative"}
	}
	return nil
}

// CheckDepth reports whether an agent at depth d may delegate under max m:
// it may not when d >= m.
func CheckDepth(d, m int) error {
	if d >= m {
		return &DepthError{Depth: d, Max: m}
	}
	return nil
}

// EffectiveMaxDepth is the tighter of a requested cap and the one the agent
// inherited; ok is false when neither is set.
func EffectiveMaxDepth(a Agent, requested *int) (m int, ok bool) {
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
