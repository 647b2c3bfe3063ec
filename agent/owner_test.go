package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// ownedSteer is a steer source that owns a context, as a run actor's Gate
// does: Context is the context it hands the loop, Cancel its cancel.
type ownedSteer struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (s *ownedSteer) Take(context.Context) ([][]subagent.ContentBlock, error) { return nil, nil }
func (s *ownedSteer) Context() context.Context                                { return s.ctx }
func (s *ownedSteer) Cancel() context.CancelCauseFunc                         { return s.cancel }

// A Run under the context its steer source owns runs under that context
// as it is (the model sees it, no context of Run's own beneath), and
// Close cancels it, with ErrClosed as the cause: the owner (a run actor)
// learns of the Close from its own context. Under any other context Run
// makes its own, and Close leaves the owner's alone.
func TestCloseCancelsTheContextTheSteerSourceOwns(t *testing.T) {
	for _, owned := range []bool{true, false} {
		ctx, cancel := context.WithCancelCause(testkit.Ctx(t))
		s := &ownedSteer{ctx: ctx, cancel: cancel}
		runCtx := ctx
		if !owned {
			runCtx = context.WithoutCancel(ctx) // not the owner's
		}
		seen := make(chan context.Context, 1)
		model := modelFunc(func(mctx context.Context, _ agent.Request) (agent.Response, error) {
			seen <- mctx
			<-mctx.Done()
			return agent.Response{}, context.Cause(mctx)
		})
		a := newAgent(t, agent.Config{Model: model})
		done := make(chan subagent.Result, 1)
		go func() { done <- a.Run(runCtx, prompt("go"), s) }()
		mctx := testkit.Recv(t, seen, "the model call")
		if got := mctx == ctx; got != owned {
			t.Errorf("owned %v: the model ran under the owner's context: %v", owned, got)
		}
		a.Close()
		res := testkit.Recv(t, done, "Run to return after Close")
		wantStop(t, res, subagent.Aborted)
		if !errors.Is(res.Cause, agent.ErrClosed) {
			t.Errorf("owned %v: cause %v, want agent.ErrClosed", owned, res.Cause)
		}
		if got := errors.Is(context.Cause(ctx), agent.ErrClosed); got != owned {
			t.Errorf("owned %v: the owner's context ended by Close: %v (cause %v)", owned, got, context.Cause(ctx))
		}
		cancel(nil)
	}
}
