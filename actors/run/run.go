package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/subactor/subactor/actors/internal/inline"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Body is the child's work. It runs on a goroutine the run owns, must return
// when ctx ends, and calls steer.Take before every model request. A panic is
// recovered: the run relaunches (see Spec.Relaunch) or settles with stop
// reason error; so is an error matching *CrashError (a child elsewhere
// that was lost), which its supervisor decides on as on a panic.
type Body func(ctx context.Context, steer Gate) (subagent.Result, error)

// Child is the child's work in the form that keeps its result off the
// child's stack: Run writes how the child ended to g.Exit() rather than
// returning it, so that the result takes no room in the frames under the
// model call while the child is parked there (a parked child's stack is
// most of what it costs, issue 11). Otherwise it is a Body: Run runs on a
// goroutine the run owns, must return when g.Context() ends, and calls
// g.Take before every model request; a panic is recovered.
//
// A Child that is also a subagent.Steerer takes its steers itself (a
// child running elsewhere that it stands for): the run hands each steer
// to its Steer as it comes, and that answer is the steer's.
type Child interface {
	// Run runs the child: its first activation, or, when g.Relaunched(),
	// a continuation from its last checkpoint after a crash.
	Run(g Gate)
}

// Exit is how a child ended: its result, or the error that kept it from
// having one (a Body's two results).
type Exit struct {
	Result subagent.Result
	Err    error
}

// Spec describes one activation.
type Spec struct {
	// Scope is the one the Service handed the provider: the run id and
	// the restart policy. Without a Service's scope (no RunID) the run
	// gets a fresh id.
	Scope subagent.Scope
	// SessionID is the child's session, "" when it has none here.
	SessionID string
	Agent     subagent.Agent // the published local agent, or nil
	// Ctx is the start request's context: when it ends, the child is
	// cancelled with its cause (S5). The Service's is tied to the parent's
	// and the Service's lifetimes: it is how a child ends with them.
	Ctx  context.Context
	Body Body
	// Relaunch, when set, continues the child from its last checkpoint
	// after a crash (of the child or of the run actor), within Restarts
	// (the Scope's policy when zero); without it a crash settles the run
	// with stop reason error (A2).
	Relaunch Body
	// Child, when set, is the child's work instead of Body and Relaunch;
	// with Relaunchable it is relaunched after a crash as Relaunch is.
	Child        Child
	Relaunchable bool
	Restarts     subagent.RestartPolicy
	// Release frees the child's resources after each Body returned and
	// before the run counts as quiesced. Optional; a Child frees its own.
	Release func()
	// Cancel is Ctx's own cancel (the Scope's Cancel), when the provider
	// hands it over because nothing else of its own runs under Ctx: a
	// run that cannot relaunch then runs its one child under Ctx itself
	// and cancels Ctx to cancel the child, rather than deriving a
	// context of its own. Optional.
	Cancel context.CancelCauseFunc
}

// handle is the caller's side of a run (Run). It lives in its run actor's
// allocation (see runActor).
type handle struct {
	sys *actor.ActorSystem
	// pid is stored by Start once the actor is spawned, and by the actor
	// as it starts, which may be first: the actor may start (and launch
	// its child) while Start is still spawning it.
	pid       atomic.Pointer[actor.PID]
	id        string
	sessionID string
	agent     subagent.Agent
	// result is the run's result once the settled latch is closed: the
	// lifecycle's settle effect, which it emits once and never changes
	// after.
	result *settle
	// latches: settled once result is final; stopped once the actor has
	// stopped (a message sent to it then is never answered); quiesced
	// once it has stopped and every goroutine it launched has returned,
	// live counting those still to finish.
	latches latches
	steers  atomic.Uint64 // correlation ids of this handle's steers
}

// The run's latches.
const (
	settled = iota
	stopped
	quiesced
)

// latches are one-way signals, each a channel closed once. A channel is
// made only when someone waits before its latch closes: most runs are
// never waited on while they work, and three channels per parked child
// are memory issue 11 counts.
type latches struct {
	chs [3]chan struct{}
	// observers are OnSettled's until the settled latch closes.
	observers []func(subagent.Result, error)
	mu        sync.Mutex
	live      atomic.Int32 // the handle's (here, it fills what closed leaves of a word)
	closed    [3]bool
}

// closedChan is what a latch closed before anyone waited hands out.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// wait returns a channel closed once latch i is.
func (l *latches) wait(i int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chs[i] == nil {
		if l.closed[i] {
			return closedChan
		}
		l.chs[i] = make(chan struct{})
	}
	return l.chs[i]
}

// isClosed reports whether latch i is closed.
func (l *latches) isClosed(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed[i]
}

// close closes latch i; once only.
func (l *latches) close(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked(i)
}

func (l *latches) closeLocked(i int) {
	l.closed[i] = true
	if l.chs[i] != nil {
		close(l.chs[i])
	}
}

// Run is the caller's side of a run: subagent.Run, and Steerer for a live
// child.
type Run interface {
	subagent.Run
	subagent.Steerer
}

// Start spawns the run actor, which starts the body at once. The provider
// returns the run to its caller, or disposes it to roll back.
func Start(sys *actors.System, spec Spec) Run {
	if spec.Ctx == nil {
		spec.Ctx = context.Background()
	}
	if spec.Restarts == (subagent.RestartPolicy{}) {
		spec.Restarts = spec.Scope.Restarts
	}
	id := spec.Scope.RunID
	if id == "" {
		id = ids.New()
	}
	a := &runActor{start: spec.Ctx, child: spec.Child}
	if a.child == nil {
		a.child = &bodies{body: spec.Body, again: spec.Relaunch, free: spec.Release}
	}
	h := &a.h
	h.sys, h.id, h.sessionID, h.agent = sys.ActorSystem(), id, spec.SessionID, spec.Agent
	h.result = &a.life.result
	h.latches.live.Store(1) // the actor itself
	relaunchable := spec.Relaunch != nil
	if spec.Child != nil {
		relaunchable = spec.Relaunchable
	}
	a.life.init(relaunchable)
	parent, _ := spec.Ctx.Value(spawnerKey{}).(*spawner)
	if parent != nil && !parent.used.CompareAndSwap(false, true) {
		parent = nil // a run of the run's own child: spawned as any other
	}
	// A child that is never relaunched may run under the start context
	// itself, one context fewer per run: so may one whose only
	// supervisor is a guardian that never restarts (a zero policy).
	if !relaunchable || (parent == nil && spec.Restarts.Max <= 0) {
		a.bound = spec.Cancel
	}
	a.quiet.Store(a.life.quietTake())
	// The producer hands protoactor the same actor on a restart, which
	// keeps the run's state: the restart relaunches its child.
	props := inline.Props(func() actor.Actor { return a })
	var mw []actor.ReceiverMiddleware
	if parent != nil {
		mw = parent.mw
	}
	if st, ok := spec.Child.(subagent.Steerer); ok {
		mw = append(slices.Clip(mw), (&steerRelay{to: st, pending: map[uint64]context.CancelFunc{}}).middleware)
	}
	if mw != nil {
		props = props.Configure(actor.WithReceiverMiddleware(mw...))
	}
	if parent != nil {
		parent.pid = parent.in.SpawnPrefix(props, "run-")
		h.pid.Store(parent.pid)
	} else {
		h.pid.Store(supervised(h.sys, spec.Restarts).SpawnPrefix(props, "run-"))
	}
	return h
}

// ID implements subagent.Run.
func (h *handle) ID() string { return h.id }

// SessionID implements subagent.Run.
func (h *handle) SessionID() string { return h.sessionID }

// LocalAgent implements subagent.Run.
func (h *handle) LocalAgent() subagent.Agent { return h.agent }

// Wait implements subagent.Run. Once ctx has ended it returns ctx's
// error, settled or not, so that what a cancellation reports never
// depends on which of the two a waiter saw first.
func (h *handle) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-h.latches.wait(settled):
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return subagent.Result{}, err
	}
	return h.result.Result, h.result.Err
}

// OnSettled implements subagent.Run. The run actor calls f as it settles,
// before Wait returns, so what f sends is ordered before anything the
// waiter does next; f must not block. Registering takes no message, so an
// observer can never arrive after the actor stopped.
func (h *handle) OnSettled(f func(subagent.Result, error)) {
	l := &h.latches
	l.mu.Lock()
	if !l.closed[settled] {
		l.observers = append(l.observers, f)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f(h.result.Result, h.result.Err)
}

// Dispose implements subagent.Run. Every caller waits for the same signal,
// so concurrent and repeated calls all return once the run has quiesced.
func (h *handle) Dispose(ctx context.Context) error {
	if h.latches.isClosed(quiesced) {
		return nil
	}
	h.sys.Root.Send(h.pid.Load(), dispose{})
	select {
	case <-h.latches.wait(quiesced):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Steer implements subagent.Steerer. When ctx ends first the steer is
// withdrawn; the call then reports what became of it: admitted after all
// (nil) or ctx's error.
func (h *handle) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	if len(message) == 0 {
		return &subagent.InvalidRequestError{Field: "message", Reason: "must not be empty"}
	}
	id := h.steers.Add(1)
	call := ask.Send(h.sys, h.pid.Load(), &messages.Steer{SteerId: id, Content: wire.FromContent(message)})
	defer call.Close()
	reply, err := call.Wait(ctx, h.latches.wait(stopped))
	if err != nil && ctx.Err() != nil {
		call.Follow(h.pid.Load(), &messages.SteerWithdraw{SteerId: id})
		// The actor answers every steer it holds, so this wait is short.
		if reply, err := call.Wait(context.Background(), h.latches.wait(stopped)); err == nil && reply.(*messages.SteerAnswer).Admitted {
			return nil
		}
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", subagent.ErrNotDelivered, err)
	}
	if a := reply.(*messages.SteerAnswer); !a.Admitted {
		return fmt.Errorf("%w: %s", subagent.ErrNotDelivered, a.Reason)
	}
	return nil
}

// Gate is the child's side of its run: Take is asked before every model
// request and returns the steers admitted into it; the rest is what the
// child's goroutine runs under and where it writes how it ended.
type Gate interface {
	// Take implements agent.SteerSource.
	Take(ctx context.Context) ([][]subagent.ContentBlock, error)
	// Context is the child's context: it ends when the run cancels the
	// child.
	Context() context.Context
	// Cancel is the cancel of the child's context, with which the run
	// cancels the child: a child whose loop something else may also end
	// (an agent's Close) hands it on, so that the loop runs under the
	// context as it is.
	Cancel() context.CancelCauseFunc
	// Relaunched reports whether the child is a relaunch after a crash.
	Relaunched() bool
	// Exit is where a Child writes how it ended.
	Exit() *Exit
}

// gate is the run's Gate. It also carries what the child's goroutine
// runs and how the child ended.
type gate struct {
	run *runActor // whose actor answers every Take
	// waiting is the reply channel of the Take in progress, nil when
	// none; under the run's latches.mu, with which the actor closes the
	// stopped latch.
	waiting chan snapshot
	// The child's goroutine: its context and cancel, and its exit for
	// the actor.
	ctx    context.Context
	cancel context.CancelCauseFunc
	exited childExited
}

// Context implements Gate.
func (g *gate) Context() context.Context { return g.ctx }

// Cancel implements Gate.
func (g *gate) Cancel() context.CancelCauseFunc { return g.cancel }

// Relaunched implements Gate.
func (g *gate) Relaunched() bool { return g != &g.run.first } // the first child's is the run's own

// Exit implements Gate.
func (g *gate) Exit() *Exit { return &g.exited.Exit }

// errClosed tells the loop it may make no further model request.
var errClosed = errors.New("run: closed for new requests")

// Take implements agent.SteerSource. While no steer waits and the run is
// open (quiet), the actor's answer is known: nothing to hand over, go on.
// Take then does not ask, as if it had asked just before the actor took
// the next steer or began to close; those make it ask again.
//
// Kept for two of issue 26's goals, measured without it: a Take that
// always asks costs a message round trip per model request, 4 allocations
// (allocs-parent-run: 114 per SubactorParentRun against its bound of 110)
// and about 2 µs of CPU (floor-lean-1p: SubactorSpawn at one P about
// 15.5 µs against 13.6, the lean floor about 5 µs, its bound 2.2×).
func (g *gate) Take(ctx context.Context) ([][]subagent.ContentBlock, error) {
	if g.run.quiet.Load() && ctx.Err() == nil {
		return nil, nil
	}
	h := &g.run.h
	h.latches.mu.Lock()
	if h.latches.closed[stopped] {
		h.latches.mu.Unlock()
		return nil, errClosed
	}
	// One slot: the actor's answer, or the notice of its stop.
	reply := make(chan snapshot, 1)
	g.waiting = reply
	h.latches.mu.Unlock()
	h.sys.Root.Send(h.pid.Load(), takeSnapshot{reply: reply})
	// The answer is awaited even once ctx ended: the actor answers every
	// takeSnapshot (or its stop is noticed, see actorStopped), and the
	// steers it hands over were answered admitted, so they must reach
	// the log, not be dropped here with ctx's error.
	snap := <-reply
	h.latches.mu.Lock()
	g.waiting = nil
	h.latches.mu.Unlock()
	if snap.closed {
		return nil, errClosed
	}
	if len(snap.steers) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return snap.steers, nil
}

// actorStopped closes the stopped latch of the run whose live child's
// Gate is g (nil when the actor never started one): a Take waiting for an
// answer that will never come gets a closed snapshot, and every later
// Take returns at once.
func (l *latches) actorStopped(g *gate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked(stopped)
	if g != nil && g.waiting != nil {
		select { // one slot: the answer, or else this notice
		case g.waiting <- snapshot{closed: true}:
		default:
		}
	}
}
