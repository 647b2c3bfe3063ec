package run

import (
	"context"
	"errors"

	"github.com/subactor/subactor/subagent"
)

// Phase is where a run is in its life.
type Phase int

const (
	Starting  Phase = iota // the provider is still setting up
	Published              // the caller owns the run; the child works
	Settled                // the result is final; the child may still be exiting
	Disposing              // Dispose was asked; waiting for the child to exit
	Disposed               // quiesced; the actor is gone
)

func (p Phase) String() string {
	return [...]string{"starting", "published", "settled", "disposing", "disposed"}[p]
}

// Inputs to the lifecycle. IDs name the sender that awaits an answer.
type (
	Input interface{ input() }

	InPublish struct{}
	InSteer   struct {
		ID      string
		Content []subagent.ContentBlock
	}
	InWithdraw struct{ ID string }
	InTake     struct{ ID string }
	// InCancel asks the child to stop; Cause is why (a deadline, say).
	InCancel struct{ Cause error }
	InExited struct {
		Result subagent.Result
		Err    error
	}
	InDispose struct{ ID string }
	InCrash   struct{ Reason string }
	InStopped struct{}
)

func (InPublish) input()  {}
func (InSteer) input()    {}
func (InWithdraw) input() {}
func (InTake) input()     {}
func (InCancel) input()   {}
func (InExited) input()   {}
func (InDispose) input()  {}
func (InCrash) input()    {}
func (InStopped) input()  {}

// Effects the actor carries out, in order.
type (
	Effect interface{ effect() }

	// CancelChild cancels the context of the goroutine the run owns with
	// Cause.
	CancelChild struct{ Cause error }
	// AnswerSteer tells a steer's sender whether the child admitted it.
	AnswerSteer struct {
		ID       string
		Admitted bool
		Reason   string
	}
	// Deliver answers the child's TakeSnapshot. Closed forbids another
	// model request.
	Deliver struct {
		ID     string
		Steers [][]subagent.ContentBlock
		Closed bool
	}
	// Settle fixes the result; the lifecycle emits it exactly once.
	Settle struct {
		Result subagent.Result
		Err    error
	}
	// StopSelf stops the actor: the child has exited under Dispose.
	StopSelf struct{}
	// Quiesced releases every Dispose, past and future: the child has
	// exited and the actor has stopped.
	Quiesced struct{}
)

func (CancelChild) effect() {}
func (AnswerSteer) effect() {}
func (Deliver) effect()     {}
func (Settle) effect()      {}
func (StopSelf) effect()    {}
func (Quiesced) effect()    {}

type pendingSteer struct {
	id      string
	content []subagent.ContentBlock
}

// Lifecycle is the run's state machine. It does no I/O: Step takes one input
// and returns the effects to carry out, so every transition can be tested
// without actors or goroutines.
type Lifecycle struct {
	published, settled, disposing, disposed bool
	childLive, cancelled                    bool
	cause                                   error // why the child was cancelled
	steers                                  []pendingSteer
}

// Causes of a cancellation the lifecycle makes itself.
var (
	ErrDisposing = errors.New("run: disposing")
	ErrStopped   = errors.New("run: actor stopped")
)

// CrashError is the cause of a run whose actor crashed.
type CrashError struct{ Reason string }

func (e *CrashError) Error() string { return "run actor crashed: " + e.Reason }

// NewLifecycle starts in Starting with the child's goroutine running.
func NewLifecycle() *Lifecycle { return &Lifecycle{childLive: true} }

// Phase reports the current phase.
func (l *Lifecycle) Phase() Phase {
	switch {
	case l.disposed:
		return Disposed
	case l.disposing:
		return Disposing
	case l.settled:
		return Settled
	case l.published:
		return Published
	}
	return Starting
}

// Step applies one input.
func (l *Lifecycle) Step(in Input) []Effect {
	if l.disposed {
		return nil
	}
	switch in := in.(type) {
	case InPublish:
		l.published = true
	case InSteer:
		if reason := l.closedReason(); reason != "" {
			return []Effect{AnswerSteer{ID: in.ID, Reason: reason}}
		}
		l.steers = append(l.steers, pendingSteer{in.ID, in.Content})
	case InWithdraw:
		for i, s := range l.steers {
			if s.id == in.ID {
				l.steers = append(l.steers[:i], l.steers[i+1:]...)
				return []Effect{AnswerSteer{ID: in.ID, Reason: "withdrawn"}}
			}
		}
	case InTake:
		if l.closedReason() != "" {
			return []Effect{Deliver{ID: in.ID, Closed: true}}
		}
		var fx []Effect
		var steers [][]subagent.ContentBlock
		for _, s := range l.steers {
			steers = append(steers, s.content)
			fx = append(fx, AnswerSteer{ID: s.id, Admitted: true})
		}
		l.steers = nil
		// The child gets its snapshot before the senders learn of admission.
		return append([]Effect{Deliver{ID: in.ID, Steers: steers}}, fx...)
	case InCancel:
		return l.cancel("cancelled", in.Cause)
	case InExited:
		l.childLive = false
		fx := l.refuseSteers("child exited")
		if !l.settled {
			l.settled = true
			fx = append(fx, l.exitSettle(in))
		}
		if l.disposing {
			fx = append(fx, StopSelf{})
		}
		return fx
	case InDispose:
		if l.disposing {
			return nil
		}
		l.disposing = true
		if l.childLive {
			return l.cancel("disposing", ErrDisposing)
		}
		return []Effect{StopSelf{}}
	case InCrash:
		crash := &CrashError{Reason: in.Reason}
		fx := l.cancel("run crashed", crash)
		if !l.settled {
			l.settled = true
			res := subagent.Stopped(subagent.Error, crash.Error())
			res.Cause = crash
			fx = append(fx, Settle{Result: res})
		}
		return fx
	case InStopped:
		fx := l.refuseSteers("run stopped")
		if l.childLive && !l.cancelled {
			l.cancelled, l.cause = true, ErrStopped
			fx = append(fx, CancelChild{Cause: ErrStopped})
		}
		if !l.settled {
			l.settled = true
			fx = append(fx, Settle{Result: subagent.Stopped(subagent.Error, "run actor stopped before the child settled")})
		}
		l.disposed = true
		return append(fx, Quiesced{})
	}
	return nil
}

// closedReason says why no more steers are admitted, or "" while they are.
func (l *Lifecycle) closedReason() string {
	switch {
	case l.disposing:
		return "run is disposing"
	case l.cancelled:
		return "run is cancelled"
	case !l.childLive || l.settled:
		return "run has settled"
	}
	return ""
}

func (l *Lifecycle) cancel(reason string, cause error) []Effect {
	if cause == nil {
		cause = context.Canceled
	}
	fx := l.refuseSteers(reason)
	if l.childLive && !l.cancelled {
		l.cancelled, l.cause = true, cause
		fx = append(fx, CancelChild{Cause: cause})
	}
	return fx
}

// exitSettle is the result of a child that exited unsettled. Cancel wins:
// a child cancelled before its exit was handled settles aborted, even if
// its last turn completed or its transport failed after the cancel, since
// the caller who cancelled must not act on an unconfirmed answer; the
// cancel's cause (a deadline, say) is the result's Cause unless the child
// named one.
func (l *Lifecycle) exitSettle(in InExited) Settle {
	if !l.cancelled {
		return Settle{Result: in.Result, Err: in.Err}
	}
	res := in.Result
	if res.StopReason != subagent.Aborted || in.Err != nil {
		res.StopReason, res.Detail, res.Cause = subagent.Aborted, l.cause.Error(), l.cause
	} else if res.Cause == nil {
		res.Cause = l.cause
	}
	return Settle{Result: res}
}

func (l *Lifecycle) refuseSteers(reason string) []Effect {
	fx := make([]Effect, 0, len(l.steers))
	for _, s := range l.steers {
		fx = append(fx, AnswerSteer{ID: s.id, Reason: reason})
	}
	l.steers = nil
	return fx
}
