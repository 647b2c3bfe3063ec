package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/subagent"
)

// relaunchable is a run of a child with a checkpoint (a continuable
// child's log) under a run actor of this node: losing its hosting node
// is a crash (*run.CrashError), which the run actor escalates to its
// supervisor (the Service's restart policy, or the strategy of the actor
// that spawned it with run.Spawn, A3). A restart resumes the child from
// its log on a member that can read it, never while the activation it
// replaces may still write (that one's node is lost, and its appends are
// fenced off by the resumed one's). Steers go to the current activation.
type relaunchable struct {
	p      *provider
	scope  subagent.Scope
	resume subagent.StartRequest // the child's continuation, no prompt: its log has it

	mu  sync.Mutex
	cur subagent.Run // the live activation; nil while a relaunch places one
}

// Run implements run.Child.
func (c *relaunchable) Run(g run.Gate) {
	exit, ctx := g.Exit(), g.Context()
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if g.Relaunched() {
		var err error
		if cur, err = c.p.begin(ctx, c.scope, c.resume, c.resume.Continuation.SessionID); err != nil {
			exit.Err = err
			return
		}
		c.mu.Lock()
		c.cur = cur
		c.mu.Unlock()
	}
	// Cancelling the run disposes the activation, which settles aborted.
	stop := context.AfterFunc(ctx, func() { _ = cur.Dispose(context.WithoutCancel(ctx)) })
	exit.Result, exit.Err = cur.Wait(context.WithoutCancel(ctx))
	stop()
	var lost *nodeLostError
	if errors.As(exit.Result.Cause, &lost) && ctx.Err() == nil {
		c.mu.Lock()
		c.cur = nil
		c.mu.Unlock()
		exit.Err = &run.CrashError{Reason: lost.Error()}
	}
	// Quiesced before this run counts as quiesced.
	_ = cur.Dispose(context.WithoutCancel(ctx))
}

// Steer implements subagent.Steerer: the current activation's answer.
func (c *relaunchable) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	c.mu.Lock()
	st, ok := c.cur.(subagent.Steerer)
	c.mu.Unlock()
	if !ok {
		return errRelaunching
	}
	return st.Steer(ctx, message)
}

var errRelaunching = fmt.Errorf("%w: the child is being relaunched on another member", subagent.ErrNotDelivered)

// supervise puts r, the first activation of req's child, which has a log
// (session), under a run actor of this node that relaunches it elsewhere
// when its node is lost.
func (p *provider) supervise(ctx context.Context, scope subagent.Scope, req subagent.StartRequest, r subagent.Run, session string) subagent.Run {
	req.Prompt, req.Continuation = nil, &subagent.Continuation{SessionID: session}
	again := scope
	again.Continuable = false // a relaunch resumes the child its first activation created
	c := &relaunchable{p: p, scope: again, cur: r, resume: req}
	h := run.Start(p.cfg.Node.System(), run.Spec{Scope: scope, Ctx: ctx, Child: c, Relaunchable: true})
	if _, ok := r.(subagent.Steerer); !ok {
		return struct{ subagent.Run }{h}
	}
	return h
}
