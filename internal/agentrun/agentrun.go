// Package agentrun is how the project's run actors run an agent's loop
// under a context they made and cancel themselves: a child's activation
// then has one cancellable context, the run's, rather than the run's and
// one the agent would derive from it for its Close (a context, its
// registration with its parent and that registration's map, for every
// delegation). Package agent sets Under; it is no public API.
package agentrun

import (
	"context"

	"github.com/subactor/subactor/subagent"
)

// SteerSource is agent.SteerSource: Take is asked before every model
// request.
type SteerSource interface {
	Take(ctx context.Context) ([][]subagent.ContentBlock, error)
}

// Under runs the loop of a, an *agent.Agent, from where its log ends (no
// prompt) under ctx as it is: the agent's Close cancels ctx through
// cancel, which must be ctx's, and the caller cancels ctx once Under has
// returned. The result is written to *res.
var Under func(a subagent.Agent, ctx context.Context, cancel context.CancelCauseFunc, steer SteerSource, res *subagent.Result)
