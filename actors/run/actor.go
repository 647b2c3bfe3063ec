package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// runActor feeds its mailbox to the Lifecycle and carries out the effects.
type runActor struct {
	h       *Handle
	spec    Spec
	life    *Lifecycle
	settle  context.CancelFunc
	started bool
	cancel  context.CancelFunc // the child's context
	stopCtx func() bool        // detaches the start context's AfterFunc
	replies map[string]*actor.PID
	// observers are called when the run settles.
	observers []func(subagent.Result, error)
}

func (a *runActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if !a.started { // a restart sends Started again; the child already runs
			a.started = true
			a.launch(c)
		}
	case *actor.Restarting:
		a.step(c, InCrash{Reason: "panic in run actor"})
	case *actor.Stopped:
		a.step(c, InStopped{})
	case observe:
		if a.h.settled.Err() != nil {
			a.notify(c, m.f)
		} else {
			a.observers = append(a.observers, m.f)
		}
	case *messages.Publish:
		a.step(c, InPublish{})
	case *messages.Steer:
		a.step(c, InSteer{ID: a.remember(c), Content: messages.ToContent(m.Content)})
	case *messages.SteerWithdraw:
		a.step(c, InWithdraw{ID: m.SteerId})
	case *messages.TakeSnapshot:
		a.step(c, InTake{ID: a.remember(c)})
	case *messages.Cancel:
		a.step(c, InCancel{})
	case *messages.ChildExited:
		var err error
		if m.Error != "" {
			err = errors.New(m.Error)
		}
		a.step(c, InExited{Result: messages.ToResult(m.Result), Err: err})
	case *messages.Dispose:
		a.step(c, InDispose{})
	}
}

// remember keeps the sender so an effect can answer it later.
func (a *runActor) remember(c actor.Context) string {
	s := c.Sender()
	if s == nil {
		return ""
	}
	a.replies[s.Id] = s
	return s.Id
}

func (a *runActor) reply(c actor.Context, id string, m any) {
	if pid, ok := a.replies[id]; ok {
		delete(a.replies, id)
		c.Send(pid, m)
	}
}

func (a *runActor) step(c actor.Context, in Input) {
	for _, fx := range a.life.Step(in) {
		switch fx := fx.(type) {
		case CancelChild:
			a.cancel()
		case AnswerSteer:
			a.reply(c, fx.ID, &messages.SteerAnswer{Admitted: fx.Admitted, Reason: fx.Reason})
		case Deliver:
			snap := &messages.Snapshot{Closed: fx.Closed}
			for _, s := range fx.Steers {
				snap.Steers = append(snap.Steers, &messages.SteerMessage{Content: messages.FromContent(s)})
			}
			a.reply(c, fx.ID, snap)
		case Settle:
			a.stopCtx()
			a.h.result, a.h.err = fx.Result, fx.Err
			for _, f := range a.observers {
				a.notify(c, f)
			}
			a.observers = nil
			a.settle()
		case StopSelf:
			c.Stop(c.Self())
		case Quiesced:
			close(a.h.quiesced)
		}
	}
}

// notify calls a settle observer; a panicking one is logged, so it can
// neither crash the run nor keep its waiters from being released.
func (a *runActor) notify(c actor.Context, f func(subagent.Result, error)) {
	defer func() {
		if p := recover(); p != nil {
			c.Logger().Error("subagent: settle observer panicked", "run", a.h.id, "panic", p)
		}
	}()
	f(a.h.result, a.h.err)
}

// launch starts the body on a goroutine the run owns and ties the start
// context to a Cancel message, so cancellation goes through the mailbox.
func (a *runActor) launch(c actor.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	self, root := c.Self(), c.ActorSystem().Root
	a.stopCtx = context.AfterFunc(a.spec.Ctx, func() {
		root.Send(self, &messages.Cancel{Reason: "start context ended"})
	})
	gate := &Gate{pid: self, gone: a.h.quiesced, reply: ask.New(c.ActorSystem())}
	go func() {
		exited := &messages.ChildExited{}
		defer func() { root.Send(self, exited) }()
		defer gate.reply.Close()
		defer a.release(exited)
		defer func() {
			if p := recover(); p != nil {
				exited.Result = messages.FromResult(subagent.Stopped(subagent.Error, fmt.Sprintf("child panicked: %v", p)))
			}
		}()
		res, err := a.spec.Body(ctx, gate)
		exited.Result = messages.FromResult(res)
		if err != nil {
			exited.Error = err.Error()
		}
	}()
}

// release frees the child's resources; a panic there is an infrastructure
// fault of the run, reported instead of lost.
func (a *runActor) release(exited *messages.ChildExited) {
	defer func() {
		if p := recover(); p != nil && exited.Error == "" {
			exited.Error = fmt.Sprintf("releasing child resources panicked: %v", p)
		}
	}()
	if a.spec.Release != nil {
		a.spec.Release()
	}
	a.cancel()
}
