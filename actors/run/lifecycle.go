package run

import (
	"context"
	"errors"
	"time"

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
	// InExited: the child's goroutine returned. Panic is what it panicked
	// with, "" when it returned; At is when.
	InExited struct {
		Result subagent.Result
		Err    error
		Panic  string
		At     time.Time
	}
	// InDispose asks for the run's end; ID, when set, is a sender to
	// acknowledge once quiesced.
	InDispose struct{ ID string }
	// InWatch adds a watcher to tell of the settle and of quiescence.
	InWatch struct{ ID string }
	// InCrash: the actor itself panicked handling a message.
	InCrash struct {
		Reason string
		At     time.Time
	}
	InStopped struct{}
)

func (InPublish) input()  {}
func (InSteer) input()    {}
func (InWithdraw) input() {}
func (InTake) input()     {}
func (InCancel) input()   {}
func (InExited) input()   {}
func (InDispose) input()  {}
func (InWatch) input()    {}
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
	// TellSettled sends the settled result to a watcher.
	TellSettled struct{ ID string }
	// Relaunch starts the child again from its last checkpoint; Attempt
	// counts relaunches from 1.
	Relaunch struct{ Attempt int }
	// StopSelf stops the actor: the child has exited under Dispose.
	StopSelf struct{}
	// Quiesced releases every Dispose, past and future: the child was
	// stopped and the actor has stopped.
	Quiesced struct{}
	// TellQuiesced tells a watcher, or acknowledges a Dispose, once
	// quiesced.
	TellQuiesced struct{ ID string }
)

func (CancelChild) effect()  {}
func (AnswerSteer) effect()  {}
func (Deliver) effect()      {}
func (Settle) effect()       {}
func (TellSettled) effect()  {}
func (Relaunch) effect()     {}
func (StopSelf) effect()     {}
func (Quiesced) effect()     {}
func (TellQuiesced) effect() {}

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
	watchers                                []string // told of the settle and of quiescence
	acks                                    []string // disposers told of quiescence

	relaunchable bool
	policy       subagent.RestartPolicy
	crashes      []time.Time // the relaunches within the policy's window
	restarting   bool        // the child is being stopped to relaunch
	attempts     int
}

// Causes of a cancellation the lifecycle makes itself.
var (
	ErrDisposing = errors.New("run: disposing")
	ErrStopped   = errors.New("run: actor stopped")
	errRelaunch  = errors.New("run: relaunching after a crash")
)

// CrashError is the cause of a run whose actor or child crashed beyond its
// restart budget.
type CrashError struct{ Reason string }

func (e *CrashError) Error() string { return "run crashed: " + e.Reason }

// NewLifecycle starts in Starting with the child's goroutine running. A
// relaunchable run (one with a relaunch body) relaunches its child after a
// crash within policy.
func NewLifecycle(relaunchable bool, policy subagent.RestartPolicy) *Lifecycle {
	return &Lifecycle{childLive: true, relaunchable: relaunchable, policy: policy}
}

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
		if d, ok := in.(InDispose); ok && d.ID != "" {
			return []Effect{TellQuiesced{ID: d.ID}}
		}
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
		if l.restarting || l.closedReason() != "" {
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
		return l.exited(in)
	case InDispose:
		if in.ID != "" {
			l.acks = append(l.acks, in.ID)
		}
		if l.disposing {
			return nil
		}
		l.disposing = true
		if l.childLive {
			return l.cancel("disposing", ErrDisposing)
		}
		return []Effect{StopSelf{}}
	case InWatch:
		l.watchers = append(l.watchers, in.ID)
		if l.settled {
			return []Effect{TellSettled{ID: in.ID}}
		}
	case InCrash:
		if l.mayRelaunch(in.At) {
			// Stop the child; its exit relaunches it. Pending steers
			// wait for the relaunched child's first snapshot.
			l.restarting = true
			return []Effect{CancelChild{Cause: errRelaunch}}
		}
		crash := &CrashError{Reason: in.Reason}
		l.restarting = false // a crash beyond the budget gives up a pending relaunch
		fx := l.cancel("run crashed", crash)
		if !l.settled {
			res := subagent.Stopped(subagent.Error, crash.Error())
			res.Cause = crash
			fx = append(fx, l.settle(Settle{Result: res})...)
		}
		return fx
	case InStopped:
		fx := l.refuseSteers("run stopped")
		if l.childLive && !l.cancelled {
			l.cancelled, l.cause = true, ErrStopped
			fx = append(fx, CancelChild{Cause: ErrStopped})
		}
		if !l.settled {
			res := subagent.Stopped(subagent.Aborted, ErrStopped.Error())
			res.Cause = ErrStopped
			fx = append(fx, l.settle(Settle{Result: res})...)
		}
		l.disposed = true
		fx = append(fx, Quiesced{})
		for _, id := range append(l.watchers, l.acks...) {
			fx = append(fx, TellQuiesced{ID: id})
		}
		return fx
	}
	return nil
}

// exited handles the end of the child's goroutine: a relaunch, a settle, or
// nothing more than a stop under Dispose.
func (l *Lifecycle) exited(in InExited) []Effect {
	l.childLive = false
	// A child stopped for a relaunch that still finished its work keeps
	// its answer; one that aborted, or panicked within budget, relaunches.
	finished := in.Panic == "" && in.Err == nil && in.Result.StopReason != subagent.Aborted
	restarting := l.restarting
	l.restarting = false
	if (restarting && !finished || in.Panic != "" && l.mayRelaunch(in.At)) && !l.cancelled && !l.disposing {
		l.childLive = true
		l.attempts++
		return []Effect{Relaunch{Attempt: l.attempts}}
	}
	fx := l.refuseSteers("child exited")
	if !l.settled {
		fx = append(fx, l.settle(l.exitSettle(in))...)
	}
	if l.disposing {
		fx = append(fx, StopSelf{})
	}
	return fx
}

// mayRelaunch reports whether a crash at now is within the restart budget,
// and if so counts it.
func (l *Lifecycle) mayRelaunch(now time.Time) bool {
	if !l.relaunchable || l.settled || l.cancelled || l.disposing || l.restarting || l.policy.Max <= 0 {
		return false
	}
	recent := l.crashes[:0]
	for _, t := range l.crashes {
		if now.Sub(t) < l.policy.Window {
			recent = append(recent, t)
		}
	}
	l.crashes = recent
	if len(l.crashes) >= l.policy.Max {
		return false
	}
	l.crashes = append(l.crashes, now)
	return true
}

func (l *Lifecycle) settle(s Settle) []Effect {
	l.settled = true
	fx := []Effect{s}
	for _, id := range l.watchers {
		fx = append(fx, TellSettled{ID: id})
	}
	return fx
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
		if in.Panic != "" {
			crash := &CrashError{Reason: "child panicked: " + in.Panic}
			res := subagent.Stopped(subagent.Error, crash.Error())
			res.Cause = crash
			return Settle{Result: res}
		}
		return Settle{Result: in.Result, Err: in.Err}
	}
	res := in.Result
	if res.StopReason != subagent.Aborted || in.Err != nil || in.Panic != "" {
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
