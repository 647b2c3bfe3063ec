package run

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Local messages: Go values that only this process's code can send, so no
// peer can forge them when nodes talk (K3). The child's goroutine, the
// provider and the Handle send these; the wire messages a run answers are
// the protobuf ones in package messages (Steer, SteerWithdraw, Cancel,
// Dispose, Watch).
type (
	publish      struct{}
	takeSnapshot struct{ reply chan snapshot }
	snapshot     struct {
		steers [][]subagent.ContentBlock
		closed bool
	}
	childExited struct {
		result subagent.Result
		err    error
		panic  string
	}
	// cancelFor is the start context ending, with its cause.
	cancelFor struct{ cause error }
	observe   struct{ f func(subagent.Result, error) }
)

// steerFrom is where a steer's answer goes: the sender and its own id for
// the steer, so one sender may have several steers pending.
type steerFrom struct {
	pid *actor.PID
	id  uint64
}

// runActor feeds its mailbox to the Lifecycle and carries out the effects.
type runActor struct {
	h       *Handle
	spec    Spec
	life    *Lifecycle
	started bool
	cancel  context.CancelCauseFunc // the live child's context
	stopCtx func() bool             // detaches the start context's AfterFunc
	replies map[string]steerFrom    // pending steers by key; made on first use
	take    chan snapshot           // the child's Take awaiting its snapshot
	senders map[string]*actor.PID   // watchers and disposers by key; made on first use
	// observers are called when the run settles.
	observers []func(subagent.Result, error)
}

// Receive recovers a panic in place (A2): the crash is a lifecycle input
// (a relaunch within budget, or an error settle), the command being
// handled is answered, and a Dispose is never dropped.
func (a *runActor) Receive(c actor.Context) {
	msg := c.Message()
	defer a.crashed(c, msg)
	guard.Enter("run", msg)
	a.receive(c, msg)
}

// crashed is Receive's deferred recovery.
func (a *runActor) crashed(c actor.Context, msg any) {
	p := recover()
	if p == nil {
		return
	}
	c.Logger().Error("subagent: run actor crashed", "run", a.h.id, "message", fmt.Sprintf("%T", msg), "panic", p)
	// A steer the crash kept from being recorded is answered here; one
	// that was recorded is refused or kept by the transition.
	steer, isSteer := msg.(*messages.Steer)
	unrecorded := isSteer && c.Sender() != nil
	if unrecorded {
		_, recorded := a.replies[steerKey(c.Sender(), steer.SteerId)]
		unrecorded = !recorded
	}
	a.step(c, InCrash{Reason: fmt.Sprintf("handling %T: %v", msg, p), At: time.Now()})
	switch msg.(type) {
	case *messages.Steer:
		if unrecorded {
			c.Send(c.Sender(), &messages.SteerAnswer{SteerId: steer.SteerId, Reason: "run crashed"})
		}
	case *messages.Dispose:
		// The crash must not drop a Dispose: its callers wait for it.
		a.step(c, InDispose{ID: a.sender(c)})
	}
}

func (a *runActor) receive(c actor.Context, msg any) {
	switch m := msg.(type) {
	case *actor.Started:
		if !a.started {
			a.started = true
			a.watchStart(c)
			a.launch(c, a.spec.Body)
		}
	case *actor.Stopped:
		a.step(c, InStopped{})
	case observe:
		if a.life.settled {
			a.notify(c, m.f)
		} else {
			a.observers = append(a.observers, m.f)
		}
	case publish:
		a.step(c, InPublish{})
	case takeSnapshot:
		// The child's loop asks once per model request and waits for the
		// answer, so there is one Take at a time.
		a.take = m.reply
		a.step(c, InTake{ID: "take"})
	case childExited:
		a.step(c, InExited{Result: m.result, Err: m.err, Panic: m.panic, At: time.Now()})
	case cancelFor:
		a.step(c, InCancel{Cause: m.cause})
	case *messages.Steer:
		if s := c.Sender(); s != nil {
			key := steerKey(s, m.SteerId)
			if a.replies == nil {
				a.replies = map[string]steerFrom{}
			}
			a.replies[key] = steerFrom{pid: s, id: m.SteerId}
			a.step(c, InSteer{ID: key, Content: messages.ToContent(m.Content)})
		}
	case *messages.SteerWithdraw:
		if s := c.Sender(); s != nil {
			a.step(c, InWithdraw{ID: steerKey(s, m.SteerId)})
		}
	case *messages.Cancel:
		a.step(c, InCancel{Cause: fmt.Errorf("run: cancelled: %s", m.Reason)})
	case *messages.Dispose:
		a.step(c, InDispose{ID: a.sender(c)})
	case *messages.Watch:
		if id := a.sender(c); id != "" {
			a.step(c, InWatch{ID: id})
		}
	}
}

// sender remembers a wire sender to answer later and returns its key, or
// "" when the message came without one (the local handle).
func (a *runActor) sender(c actor.Context) string {
	s := c.Sender()
	if s == nil {
		return ""
	}
	key := s.Address + "/" + s.Id
	if a.senders == nil {
		a.senders = map[string]*actor.PID{}
	}
	a.senders[key] = s
	return key
}

// steerKey identifies a steer by its sender's address and the sender's id
// for it: a router steering on behalf of many callers gets each answer.
func steerKey(s *actor.PID, id uint64) string {
	return s.Address + "/" + s.Id + "#" + strconv.FormatUint(id, 10)
}

func (a *runActor) step(c actor.Context, in Input) {
	for _, fx := range a.life.Step(in) {
		switch fx := fx.(type) {
		case CancelChild:
			a.cancel(fx.Cause)
		case AnswerSteer:
			if to, ok := a.replies[fx.ID]; ok {
				delete(a.replies, fx.ID)
				c.Send(to.pid, &messages.SteerAnswer{SteerId: to.id, Admitted: fx.Admitted, Reason: fx.Reason})
			}
		case Deliver:
			if ch := a.take; ch != nil {
				a.take = nil
				select { // one slot, one Take at a time: never blocks the actor
				case ch <- snapshot{steers: fx.Steers, closed: fx.Closed}:
				default:
				}
			}
		case Settle:
			a.stopCtx()
			a.h.result, a.h.err = fx.Result, fx.Err
			for _, f := range a.observers {
				a.notify(c, f)
			}
			a.observers = nil
			close(a.h.settled)
		case TellSettled:
			if to := a.senders[fx.ID]; to != nil {
				settled := &messages.RunSettled{RunId: a.h.id, Result: messages.FromResult(a.h.result)}
				if a.h.err != nil {
					settled.Error = a.h.err.Error()
				}
				c.Send(to, settled)
			}
		case Relaunch:
			c.Logger().Warn("subagent: relaunching a crashed run from its last checkpoint", "run", a.h.id, "attempt", fx.Attempt)
			a.launch(c, a.spec.Relaunch)
		case StopSelf:
			c.Stop(c.Self())
		case Quiesced:
			close(a.h.stopped)
			a.h.done()
		case TellQuiesced:
			if to := a.senders[fx.ID]; to != nil {
				c.Send(to, &messages.RunQuiesced{RunId: a.h.id})
			}
		}
	}
}

// notify calls a settle observer; a panicking one is logged, so it can
// neither crash the run nor keep its waiters from being released.
// Observers are the seam's own (the Service's, which only sends a
// message) or the provider's; callers' observers run on goroutines of
// their own (the Service's run wrapper).
func (a *runActor) notify(c actor.Context, f func(subagent.Result, error)) {
	defer func() {
		if p := recover(); p != nil {
			c.Logger().Error("subagent: settle observer panicked", "run", a.h.id, "panic", p)
		}
	}()
	f(a.h.result, a.h.err)
}

// watchStart ties the start context to a cancel message, so cancellation
// goes through the mailbox.
func (a *runActor) watchStart(c actor.Context) {
	self, root, start := c.Self(), c.ActorSystem().Root, a.spec.Ctx
	a.stopCtx = context.AfterFunc(start, func() {
		root.Send(self, cancelFor{cause: context.Cause(start)})
	})
}

// launch starts body on a goroutine the run owns.
func (a *runActor) launch(c actor.Context, body Body) {
	ctx, cancel := context.WithCancelCause(context.Background())
	a.cancel = cancel
	self, root := c.Self(), c.ActorSystem().Root
	gate := &Gate{pid: self, root: root, gone: a.h.stopped, reply: make(chan snapshot, 1)}
	a.h.live.Add(1)
	go func() {
		var exited childExited
		defer a.h.done()
		defer func() { root.Send(self, exited) }()
		defer a.release(&exited, cancel)
		defer func() {
			if p := recover(); p != nil {
				exited.panic = fmt.Sprint(p)
			}
		}()
		exited.result, exited.err = body(ctx, gate)
	}()
}

// release frees the child's resources; a panic there is an infrastructure
// fault of the run, reported instead of lost.
func (a *runActor) release(exited *childExited, cancel context.CancelCauseFunc) {
	defer func() {
		if p := recover(); p != nil && exited.err == nil {
			exited.err = fmt.Errorf("releasing child resources panicked: %v", p)
		}
	}()
	if a.spec.Release != nil {
		a.spec.Release()
	}
	cancel(context.Canceled)
}
