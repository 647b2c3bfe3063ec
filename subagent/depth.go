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
