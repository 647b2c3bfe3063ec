package run

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Local messages: Go values that only this process's code can send, so no
// peer can forge them when nodes talk (K3). The child's goroutine, the
// provider and the handle send these; the wire messages a run answers are
// the protobuf ones in package messages (Steer, SteerWithdraw, Cancel,
// Dispose, Watch). The frequent ones are pointer-shaped or of size zero,
// so sending them allocates nothing.
type (
	takeSnapshot struct{ reply chan snapshot }
	snapshot     struct {
		steers [][]subagent.ContentBlock
		closed bool
	}
	// childExited is sent as a pointer to its Gate's own: the child's
	// goroutine writes it before it sends it and never touches it after.
	childExited struct{ Exit }
	// childPanic is the Err of a childExited whose child panicked.
	childPanic struct{ value string }
	// dispose is the handle's Dispose: a wire Dispose without a sender.
	dispose struct{}
	// resumed is what an actor that escalated a crash sends itself: its
	// mailbox handles it once the supervisor's directive was carried out.
	resumed struct{}
)

// steerFrom is where a steer's answer goes: the sender and its own id for
// the steer, so one sender may have several steers pending.
type steerFrom struct {
	pid *actor.PID
	id  uint64
}

// runActor feeds its mailbox to the lifecycle and carries out the effects.
// Its handle, its lifecycle and the first child's Gate live in it, since
// they live as long as the run does.
type runActor struct {
	h    handle
	life lifecycle
	// What the Spec gave the run, dropped once it has quiesced.
	start context.Context
	// bound is start's cancel when the one child runs under start itself
	// (Spec.Cancel); nil when each child gets a context of its own.
	bound context.CancelCauseFunc
	child Child         // the Spec's, or its Body, Relaunch and Release as one
	take  chan snapshot // the child's Take awaiting its snapshot
	more  *actorMore    // made on first use
	live  *gate         // the live child's; nil until the actor started
	first gate          // the first child's
	// quiet is the lifecycle's quietTake as of its last Step: the child
	// may take without asking (see Gate.Take).
	quiet atomic.Bool
}

// bodies are a Spec's Body, Relaunch and Release as a Child: most runs
// (the spawn provider's) have a Child of their own instead.
type bodies struct {
	body, again Body
	free        func()
}

// Run implements Child.
func (b *bodies) Run(g Gate) {
	body := b.body
	if g.Relaunched() {
		body = b.again
	}
	exit := g.Exit()
	exit.Result, exit.Err = body(g.Context(), g)
}

// actorMore is what few runs need: pending steers, wire senders.
type actorMore struct {
	replies map[string]steerFrom  // pending steers by key
	senders map[string]*actor.PID // watchers and disposers by key
}

func (a *runActor) extra() *actorMore {
	if a.more == nil {
		a.more = new(actorMore)
	}
	return a.more
}

// replies and senders are more's, nil when there is none.
func (a *runActor) replies() map[string]steerFrom {
	if a.more == nil {
		return nil
	}
	return a.more.replies
}

func (a *runActor) senders() map[string]*actor.PID {
	if a.more == nil {
		return nil
	}
	return a.more.senders
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
		_, recorded := a.replies()[steerKey(c.Sender(), steer.SteerId)]
		unrecorded = !recorded
	}
	a.step(c, inCrash{Reason: fmt.Sprintf("handling %T: %v", msg, p), At: time.Now()})
	switch msg.(type) {
	case *messages.Steer:
		if unrecorded {
			c.Request(c.Sender(), &messages.SteerAnswer{SteerId: steer.SteerId, Reason: "run crashed"})
		}
	case *messages.Dispose, dispose:
		// The crash must not drop a Dispose: its callers wait for it.
		a.step(c, inDispose{ID: a.sender(c)})
	}
}

// receive dispatches.
func (a *runActor) receive(c actor.Context, msg any) {
	switch m := msg.(type) {
	case *actor.Started:
		if a.live == nil {
			// For the start context's watch and the child, which may
			// need it before Start has it: see handle.pid.
			a.h.pid.Store(c.Self())
			a.launch()
			return
		}
		a.step(c, inRestart{}) // started again: the supervisor's Restart
	case resumed:
		a.step(c, inResume{})
	case *actor.Stopped:
		a.step(c, inStopped{})
	case takeSnapshot:
		// The child's loop asks once per model request and waits for the
		// answer, so there is one Take at a time.
		a.take = m.reply
		a.step(c, inTake{ID: "take"})
	case *childExited:
		a.exited(c, m)
	case dispose:
		a.step(c, inDispose{})
	case *messages.Steer:
		a.steer(c, m)
	case *messages.SteerWithdraw:
		a.withdraw(c, m)
	case *messages.Cancel:
		a.cancelWire(c, m)
	case *messages.Dispose:
		a.step(c, inDispose{ID: a.sender(c)})
	case *messages.Watch:
		if id := a.sender(c); id != "" {
			a.step(c, inWatch{ID: id})
		}
	}
}

func (e *childPanic) Error() string { return "child panicked: " + e.value }

func (a *runActor) exited(c actor.Context, m *childExited) {
	in := inExited{Result: m.Result, Err: m.Err, At: time.Now()}
	if p, ok := m.Err.(*childPanic); ok {
		in.Err, in.Panic = nil, p.value
	}
	a.step(c, in)
}

func (a *runActor) steer(c actor.Context, m *messages.Steer) {
	s := c.Sender()
	if s == nil {
		return
	}
	key := steerKey(s, m.SteerId)
	more := a.extra()
	if more.replies == nil {
		more.replies = map[string]steerFrom{}
	}
	more.replies[key] = steerFrom{pid: s, id: m.SteerId}
	a.step(c, inSteer{ID: key, Content: wire.ToContent(m.Content)})
}

func (a *runActor) withdraw(c actor.Context, m *messages.SteerWithdraw) {
	if s := c.Sender(); s != nil {
		a.step(c, inWithdraw{ID: steerKey(s, m.SteerId)})
	}
}

func (a *runActor) cancelWire(c actor.Context, m *messages.Cancel) {
	a.step(c, inCancel{Cause: fmt.Errorf("run: cancelled: %s", m.Reason)})
}

// sender remembers a wire sender to answer later and returns its key, or
// "" when the message came without one (the local handle).
func (a *runActor) sender(c actor.Context) string {
	s := c.Sender()
	if s == nil {
		return ""
	}
	key := s.Address + "/" + s.Id
	more := a.extra()
	if more.senders == nil {
		more.senders = map[string]*actor.PID{}
	}
	more.senders[key] = s
	return key
}

// steerKey identifies a steer by its sender's address and the sender's id
// for it: a router steering on behalf of many callers gets each answer.
func steerKey(s *actor.PID, id uint64) string {
	return s.Address + "/" + s.Id + "#" + strconv.FormatUint(id, 10)
}

// step feeds in to the lifecycle and carries out the effects. A start
// context that ended is an input of its own before in: the child's
// context derives from it, so the child learns of the end directly, and
// the lifecycle learns of it before anything the child does next (its
// exit, its next Take), as it would from a message of its own.
func (a *runActor) step(c actor.Context, in input) {
	if a.start != nil && !a.life.cancelled && !a.life.settled && a.start.Err() != nil {
		a.apply(c, inCancel{Cause: context.Cause(a.start)})
	}
	a.apply(c, in)
}

// apply feeds in to the lifecycle and carries out the effects.
func (a *runActor) apply(c actor.Context, in input) {
	effects := a.life.step(in)
	// Before the effects: a Take after a steer was recorded, or after the
	// run began to close, asks.
	a.quiet.Store(a.life.quietTake())
	for _, fx := range effects {
		switch fx := fx.(type) {
		case *cancelChild:
			a.live.cancel(fx.Cause)
		case *answerSteer:
			a.answerSteer(c, fx)
		case *deliver:
			a.deliver(fx)
		case *settle:
			a.settle(c)
		case *tellSettled:
			a.tellSettled(c, fx.ID)
		case *relaunchChild:
			a.relaunch(c, fx.Attempt)
		case stopSelf:
			c.Stop(c.Self())
		case quiesce:
			a.h.latches.actorStopped(a.live)
			a.done()
		case *tellQuiesced:
			a.tellQuiesced(c, fx.ID)
		case *escalate:
			c.Logger().Warn("subagent: run crashed; its supervisor decides", "run", a.h.id, "reason", fx.Cause.Reason)
			c.(actor.Supervisor).EscalateFailure(fx.Cause, c.Message())
			c.Send(c.Self(), resumed{})
		}
	}
}

func (a *runActor) answerSteer(c actor.Context, fx *answerSteer) {
	if to, ok := a.replies()[fx.ID]; ok {
		delete(a.more.replies, fx.ID)
		c.Request(to.pid, &messages.SteerAnswer{SteerId: to.id, Admitted: fx.Admitted, Reason: fx.Reason})
	}
}

func (a *runActor) deliver(fx *deliver) {
	if ch := a.take; ch != nil {
		a.take = nil
		select { // one slot, one Take at a time: never blocks the actor
		case ch <- snapshot{steers: fx.Steers, closed: fx.Closed}:
		default:
		}
	}
}

// settle tells the observers of the settle, those registered meanwhile
// too, and then the handle's waiters; the result is the lifecycle's, which
// the handle reads (handle.result).
func (a *runActor) settle(c actor.Context) {
	l := &a.h.latches
	for {
		l.mu.Lock()
		fs := l.observers
		l.observers = nil
		if len(fs) == 0 {
			l.closeLocked(settled)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		for _, f := range fs {
			a.notify(c, f)
		}
	}
}

func (a *runActor) tellSettled(c actor.Context, id string) {
	if to := a.senders()[id]; to != nil {
		res := a.h.result
		settled := &messages.RunSettled{RunId: a.h.id, Result: wire.FromResult(res.Result)}
		if res.Err != nil {
			settled.Error = res.Err.Error()
		}
		c.Request(to, settled)
	}
}

func (a *runActor) relaunch(c actor.Context, attempt int) {
	c.Logger().Warn("subagent: restarting a crashed run from its last checkpoint", "run", a.h.id, "attempt", attempt)
	a.launch()
}

func (a *runActor) tellQuiesced(c actor.Context, id string) {
	if to := a.senders()[id]; to != nil {
		c.Request(to, &messages.RunQuiesced{RunId: a.h.id})
	}
}

// done counts down one of the actor and the goroutines it launched; the
// last one closes quiesced. The handle holds the run's memory as long as
// its caller keeps it, so the last one also drops what the caller gave
// the run (its closures, the start context): with nothing of the run
// left running, nothing reads them any more.
func (a *runActor) done() {
	if a.h.latches.live.Add(-1) == 0 {
		a.start, a.bound, a.child = nil, nil, nil
		a.first.ctx, a.first.cancel = nil, nil
		if g := a.live; g != nil {
			g.ctx, g.cancel = nil, nil
		}
		a.h.latches.close(quiesced)
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
	f(a.h.result.Result, a.h.result.Err)
}

// launch starts the child on a goroutine the run owns: its first
// activation, or a relaunch. The first child's Gate is the run's own; a
// relaunched child gets a fresh one, since its predecessor may have left
// its Gate with someone. The child's context derives from the start
// context, so a start context that ends cancels the child with its cause
// without a watch of its own; or it is the start context itself, when
// the run has its cancel (bound).
func (a *runActor) launch() {
	g := &a.first
	if g.run != nil {
		g = new(gate)
	}
	g.run = a
	if a.bound != nil {
		g.ctx, g.cancel = a.start, a.bound
	} else {
		g.ctx, g.cancel = context.WithCancelCause(a.start)
	}
	a.live = g
	a.h.latches.live.Add(1)
	go g.child()
}

// child is the child's goroutine: it runs the child, then (see finish)
// releases the child's resources and sends its exit to the actor.
func (g *gate) child() {
	presize()
	returned := false
	defer g.finish(&returned)
	g.run.child.Run(g)
	returned = true
}

// finish is the end of the child's goroutine, whether the child returned,
// panicked or called runtime.Goexit (a test's t.FailNow in a model): it
// records a crash, releases the child's resources, sends the child's exit
// to the actor and counts the goroutine done, each step even if the one
// before it panicked.
func (g *gate) finish(returned *bool) {
	p := recover()
	if p == nil && !*returned {
		p = "runtime.Goexit"
	}
	if p != nil {
		// As for a Body whose results never came: nothing of what a
		// Child wrote before it crashed counts.
		g.exited.Exit = Exit{Err: &childPanic{fmt.Sprint(p)}}
	}
	a := g.run
	defer a.done()
	defer g.exit()
	cancel := g.cancel
	if a.bound != nil {
		// The start context is the child's: it ends with the run, which
		// would otherwise take its end for the caller's cancel.
		cancel = nil
	}
	a.release(&g.exited, cancel)
}

// presize grows the child's goroutine stack while it is one frame deep,
// where the copy is cheap, to what an agent's turn needs (the agent loop
// under a model encoding JSON: about 8 KiB). Grown later, deep in the
// turn, every frame above is copied and adjusted: about a seventh of a
// delegation's CPU at one P, which the floor-lean-1p goal measurably
// needs back. A child that needs more grows as any goroutine does.
//
//go:noinline
func presize() byte {
	var pad [6 << 10]byte
	return last(pad[:])
}

// last keeps presize's frame from being optimized away.
//
//go:noinline
func last(b []byte) byte { return b[len(b)-1] }

// exit sends the child's exit to the actor. It is the last the child's
// goroutine does with g.exited.
func (g *gate) exit() {
	h := &g.run.h
	h.sys.Root.Send(h.pid.Load(), &g.exited)
}

// release frees the child's resources; a panic there is an infrastructure
// fault of the run, reported instead of lost.
func (a *runActor) release(exited *childExited, cancel context.CancelCauseFunc) {
	defer func() {
		if p := recover(); p != nil && exited.Err == nil {
			exited.Err = fmt.Errorf("releasing child resources panicked: %v", p)
		}
	}()
	if b, ok := a.child.(*bodies); ok && b.free != nil {
		b.free()
	}
	if cancel != nil {
		cancel(context.Canceled)
	}
}
