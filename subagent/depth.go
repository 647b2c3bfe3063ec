package subagent

// DelegationDepthOf is an agent's delegation depth: the larger of its
// session header's depth and its option depth (D6). A top-level agent is 0.
func DelegationDepthOf(a Agent) int {
	return max(a.Header().DelegationDepth, a.Options().SubagentDepth)
}
