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
// Dispose, Watch). The frequent ones are pointer-shaped or of size zero,
// so sending them allocates nothing.
type (
	publish      struct{}
	takeSnapshot struct{ reply chan snapshot }
	snapshot     struct {
		steers [][]subagent.ContentBlock
		closed bool
	}
	// childExited is sent as a pointer to its Gate's own: the child's
	// goroutine writes it before it sends it and never touches it after.
	childExited struct {
		result subagent.Result
		err    error
		panic  string
	}
	// cancelFor is the start context ending, with its cause.
	cancelFor struct{ cause error }
	observe   struct{ f func(subagent.Result, error) }
	// dispose is the Handle's Dispose: a wire Dispose without a sender.
	dispose struct{}
)

// steerFrom is where a steer's answer goes: the sender and its own id for
// the steer, so one sender may have several steers pending.
type steerFrom struct {
	pid *actor.PID
	id  uint64
}

// runActor feeds its mailbox to the Lifecycle and carries out the effects.
// It is the run's one allocation: its Handle, its Lifecycle and the first
// child's Gate live in it, since they live as long as the run does. It
// takes 1,144 bytes on 64-bit platforms, so with the allocator's 8-byte
// header it fits the 1,152-byte size class: mind the next one (1,280)
// when adding to it.
type runActor struct {
	h       Handle
	life    Lifecycle
	spec    Spec
	started bool
	cancel  context.CancelCauseFunc // the live child's context
	stopCtx func() bool             // detaches the start context's AfterFunc; nil when none
	replies map[string]steerFrom    // pending steers by key; made on first use
	take    chan snapshot           // the child's Take awaiting its snapshot
	senders map[string]*actor.PID   // watchers and disposers by key; made on first use
	// observers are called when the run settles; observer holds the
	// first, usually the only one (the Service's).
	observers []func(subagent.Result, error)
	observer  [1]func(subagent.Result, error)
	gate      Gate // the first child's
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
	case *messages.Dispose, dispose:
		// The crash must not drop a Dispose: its callers wait for it.
		a.step(c, InDispose{ID: a.sender(c)})
	}
}

// receive dispatches. It runs on the child's goroutine whenever the
// child's own send is handled inline, deep in the child's stack, so the
// cases that need more than a few words of stack have methods of their
// own and this frame stays small.
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
	case *childExited:
		a.exited(c, m)
	case dispose:
		a.step(c, InDispose{})
	case cancelFor:
		a.step(c, InCancel{Cause: m.cause})
	case *messages.Steer:
		a.steer(c, m)
	case *messages.SteerWithdraw:
		a.withdraw(c, m)
	case *messages.Cancel:
		a.cancelWire(c, m)
	case *messages.Dispose:
		a.step(c, InDispose{ID: a.sender(c)})
	case *messages.Watch:
		if id := a.sender(c); id != "" {
			a.step(c, InWatch{ID: id})
		}
	}
}

func (a *runActor) exited(c actor.Context, m *childExited) {
	a.step(c, InExited{Result: m.result, Err: m.err, Panic: m.panic, At: time.Now()})
}

func (a *runActor) steer(c actor.Context, m *messages.Steer) {
	s := c.Sender()
	if s == nil {
		return
	}
	key := steerKey(s, m.SteerId)
	if a.replies == nil {
		a.replies = map[string]steerFrom{}
	}
	a.replies[key] = steerFrom{pid: s, id: m.SteerId}
	a.step(c, InSteer{ID: key, Content: messages.ToContent(m.Content)})
}

func (a *runActor) withdraw(c actor.Context, m *messages.SteerWithdraw) {
	if s := c.Sender(); s != nil {
		a.step(c, InWithdraw{ID: steerKey(s, m.SteerId)})
	}
}

func (a *runActor) cancelWire(c actor.Context, m *messages.Cancel) {
	a.step(c, InCancel{Cause: fmt.Errorf("run: cancelled: %s", m.Reason)})
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

// step feeds in to the Lifecycle and carries out the effects, each one
// before the next Step, which reuses them.
func (a *runActor) step(c actor.Context, in Input) {
	for _, fx := range a.life.Step(in) {
		switch fx := fx.(type) {
		case *CancelChild:
			a.cancel(fx.Cause)
		case *AnswerSteer:
			a.answerSteer(c, fx)
		case *Deliver:
			a.deliver(fx)
		case *Settle:
			a.settle(c, fx)
		case *TellSettled:
			a.tellSettled(c, fx.ID)
		case *Relaunch:
			a.relaunch(c, fx.Attempt)
		case StopSelf:
			c.Stop(c.Self())
		case Quiesced:
			close(a.h.stopped)
			a.done()
		case *TellQuiesced:
			a.tellQuiesced(c, fx.ID)
		}
	}
}

func (a *runActor) answerSteer(c actor.Context, fx *AnswerSteer) {
	if to, ok := a.replies[fx.ID]; ok {
		delete(a.replies, fx.ID)
		c.Send(to.pid, &messages.SteerAnswer{SteerId: to.id, Admitted: fx.Admitted, Reason: fx.Reason})
	}
}

func (a *runActor) deliver(fx *Deliver) {
	if ch := a.take; ch != nil {
		a.take = nil
		select { // one slot, one Take at a time: never blocks the actor
		case ch <- snapshot{steers: fx.Steers, closed: fx.Closed}:
		default:
		}
	}
}

func (a *runActor) settle(c actor.Context, fx *Settle) {
	if a.stopCtx != nil {
		a.stopCtx()
		a.stopCtx = nil // it holds the start context
	}
	a.h.result, a.h.err = fx.Result, fx.Err
	for _, f := range a.observers {
		a.notify(c, f)
	}
	clear(a.observers)
	a.observers = nil
	close(a.h.settled)
}

func (a *runActor) tellSettled(c actor.Context, id string) {
	if to := a.senders[id]; to != nil {
		settled := &messages.RunSettled{RunId: a.h.id, Result: messages.FromResult(a.h.result)}
		if a.h.err != nil {
			settled.Error = a.h.err.Error()
		}
		c.Send(to, settled)
	}
}

func (a *runActor) relaunch(c actor.Context, attempt int) {
	c.Logger().Warn("subagent: relaunching a crashed run from its last checkpoint", "run", a.h.id, "attempt", attempt)
	a.launch(c, a.spec.Relaunch)
}

func (a *runActor) tellQuiesced(c actor.Context, id string) {
	if to := a.senders[id]; to != nil {
		c.Send(to, &messages.RunQuiesced{RunId: a.h.id})
	}
}

// done counts down one of the actor and the goroutines it launched; the
// last one closes quiesced. The Handle holds the run's memory as long as
// its caller keeps it, so the last one also drops what the caller gave
// the run (its closures, the start context): with nothing of the run
// left running, nothing reads them any more.
func (a *runActor) done() {
	if a.h.live.Add(-1) == 0 {
		a.spec = Spec{}
		a.gate.ctx, a.gate.cancel, a.gate.body = nil, nil, nil
		close(a.h.quiesced)
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
// goes through the mailbox. A start context that can never end needs no
// watch.
func (a *runActor) watchStart(c actor.Context) {
	start := a.spec.Ctx
	if start.Done() == nil {
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	a.stopCtx = context.AfterFunc(start, func() {
		root.Send(self, cancelFor{cause: context.Cause(start)})
	})
}

// launch starts body on a goroutine the run owns. The first child's Gate
// is the run's own; a relaunched child gets a fresh one, since its
// predecessor may have left its Gate with someone.
func (a *runActor) launch(c actor.Context, body Body) {
	ctx, cancel := context.WithCancelCause(context.Background())
	a.cancel = cancel
	g := &a.gate
	if g.run != nil {
		g = new(Gate)
	}
	g.pid, g.root, g.reply = c.Self(), c.ActorSystem().Root, make(chan snapshot, 1)
	g.run, g.ctx, g.cancel, g.body = a, ctx, cancel, body
	a.h.live.Add(1)
	go g.child()
}

// child is the child's goroutine: it runs the body, releases the child's
// resources, then sends its exit to the actor.
func (g *Gate) child() {
	growStack()
	a := g.run
	defer a.done()
	defer g.exit()
	defer a.release(&g.exited, g.cancel)
	defer g.recoverPanic()
	g.exited.result, g.exited.err = g.body(g.ctx, g)
}

func (g *Gate) recoverPanic() {
	if p := recover(); p != nil {
		g.exited.panic = fmt.Sprint(p)
	}
}

// exit sends the child's exit to the actor. It is the last the child's
// goroutine does with g.exited.
func (g *Gate) exit() { g.root.Send(g.pid, &g.exited) }

// growStack grows the new goroutine's stack to what a child's loop needs
// in one step, while it holds one frame: growing it on demand deep in the
// loop copies the stack twice and adjusts every frame on it each time,
// about a seventh of a delegation's CPU.
//
//go:noinline
func growStack() {
	var pad [4 << 10]byte
	touch(pad[:])
}

//go:noinline
func touch([]byte) {}

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
