package run

import (
	"context"
	"errors"
	"slices"
	"sync"
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

// Effects the actor carries out, in order. Step returns those that carry
// data as pointers into the Lifecycle (*Settle, *Deliver, ...), and the
// zero-size ones (StopSelf, Quiesced) as values, so that a step allocates
// nothing; like the slice that holds them, they are valid until the next
// Step.
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

func (*CancelChild) effect()  {}
func (*AnswerSteer) effect()  {}
func (*Deliver) effect()      {}
func (*Settle) effect()       {}
func (*TellSettled) effect()  {}
func (*Relaunch) effect()     {}
func (StopSelf) effect()      {}
func (Quiesced) effect()      {}
func (*TellQuiesced) effect() {}

// effects is what one Step returns: the list, and the effects its entries
// point to (but the Settle, which is the Lifecycle's result). Step reuses
// all of it, so a run steps without allocating once its buffers have grown
// to what it needs; buf holds the list of most steps without a heap
// allocation at all. Released effects go to spareEffects, buffers and all,
// for the next Step of any Lifecycle.
type effects struct {
	list     []Effect
	buf      [3]Effect
	cancel   CancelChild
	deliver  Deliver
	relaunch Relaunch
	answers  []AnswerSteer
	tells    *tells // made on first use: only wire watchers and disposers are told
}

// spareEffects are effects no Lifecycle holds (see Lifecycle.Release).
var spareEffects = sync.Pool{New: func() any { return new(effects) }}

// tells are the effects that tell wire watchers and disposers.
type tells struct {
	settled  []TellSettled
	quiesced []TellQuiesced
}

// reset empties the list and the per-id effects for the next Step, and
// lets go of the steers the last snapshot delivered. The other single
// effects are overwritten when next emitted.
func (e *effects) reset() {
	clear(e.list)
	if e.list == nil {
		e.list = e.buf[:0]
	} else {
		e.list = e.list[:0]
	}
	e.deliver.Steers = nil
	clear(e.answers)
	e.answers = e.answers[:0]
	if t := e.tells; t != nil {
		clear(t.settled)
		clear(t.quiesced)
		t.settled, t.quiesced = t.settled[:0], t.quiesced[:0]
	}
}

func (e *effects) add(f Effect) { e.list = append(e.list, f) }

// The per-id effects append to their own slice and list a pointer to the
// new element. A slice that grows leaves the earlier pointers on its old
// array, which holds the same values, so they stay right.

func (e *effects) answerSteer(id string, admitted bool, reason string) {
	e.answers = append(e.answers, AnswerSteer{ID: id, Admitted: admitted, Reason: reason})
	e.add(&e.answers[len(e.answers)-1])
}

func (e *effects) tellSettled(id string) {
	t := e.told()
	t.settled = append(t.settled, TellSettled{ID: id})
	e.add(&t.settled[len(t.settled)-1])
}

func (e *effects) tellQuiesced(id string) {
	t := e.told()
	t.quiesced = append(t.quiesced, TellQuiesced{ID: id})
	e.add(&t.quiesced[len(t.quiesced)-1])
}

func (e *effects) told() *tells {
	if e.tells == nil {
		e.tells = new(tells)
	}
	return e.tells
}

func (e *effects) cancelChild(cause error) {
	e.cancel = CancelChild{Cause: cause}
	e.add(&e.cancel)
}

func (e *effects) deliverSnapshot(id string, steers [][]subagent.ContentBlock, closed bool) {
	e.deliver = Deliver{ID: id, Steers: steers, Closed: closed}
	e.add(&e.deliver)
}

func (e *effects) relaunchChild(attempt int) {
	e.relaunch = Relaunch{Attempt: attempt}
	e.add(&e.relaunch)
}

type pendingSteer struct {
	id      string
	content []subagent.ContentBlock
}

// Lifecycle is the run's state machine. It does no I/O: Step takes one input
// and returns the effects to carry out, so every transition can be tested
// without actors or goroutines.
//
// Its effects are in a buffer of their own, which a run gives back
// between steps (Release): a run is parked most of its life, waiting for
// its child's model, and every parked child has a Lifecycle (issue 11).
// Its result, once settled, stays in the Lifecycle.
type Lifecycle struct {
	published, settled, disposing, disposed bool
	childLive, cancelled                    bool
	relaunchable                            bool
	restarting                              bool  // the child is being stopped to relaunch
	cause                                   error // why the child was cancelled
	steers                                  []pendingSteer
	policy                                  subagent.RestartPolicy
	// more is what few runs need, made on first use: wire watchers and
	// disposers, and the crashes that count against the restart budget.
	// Every parked child has a Lifecycle (issue 11).
	more *lifeMore

	fx     *effects // the last Step's; nil once released
	result Settle   // the Settle effect, emitted once
}

type lifeMore struct {
	watchers []string    // told of the settle and of quiescence
	acks     []string    // disposers told of quiescence
	crashes  []time.Time // the relaunches within the policy's window
	attempts int
}

func (l *Lifecycle) extra() *lifeMore {
	if l.more == nil {
		l.more = new(lifeMore)
	}
	return l.more
}

// watchers and acks are more's, nil when there is none.
func (l *Lifecycle) watchers() []string {
	if l.more == nil {
		return nil
	}
	return l.more.watchers
}

func (l *Lifecycle) acks() []string {
	if l.more == nil {
		return nil
	}
	return l.more.acks
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
	// One allocation: a Lifecycle of its own keeps its effects.
	x := new(struct {
		l  Lifecycle
		fx effects
	})
	x.l.fx = &x.fx
	x.l.init(relaunchable, policy)
	return &x.l
}

// init is NewLifecycle for a Lifecycle allocated with the run it belongs to.
func (l *Lifecycle) init(relaunchable bool, policy subagent.RestartPolicy) {
	l.childLive, l.relaunchable, l.policy = true, relaunchable, policy
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

// Step applies one input and returns the effects to carry out, in order.
// The returned slice and the effects it points to are the Lifecycle's own
// and are valid only until the next Step, which reuses them, or Release:
// a caller carries them out (or copies them) before stepping again. The
// *Settle stays valid: it is the Lifecycle's result.
//
// Step only dispatches; each transition is a method of its own, so that
// the frame of a step, which runs deep on the child's goroutine when the
// run actor handles a message inline, is no larger than the transition
// taken needs.
func (l *Lifecycle) Step(in Input) []Effect {
	if l.fx == nil {
		l.fx = spareEffects.Get().(*effects)
	}
	l.fx.reset()
	if l.disposed {
		if d, ok := in.(InDispose); ok && d.ID != "" {
			l.fx.tellQuiesced(d.ID)
		}
		return l.fx.list
	}
	switch m := in.(type) {
	case InPublish:
		l.published = true
	case InSteer:
		l.steer(m.ID, m.Content)
	case InWithdraw:
		l.withdraw(m.ID)
	case InTake:
		l.take(m.ID)
	case InCancel:
		l.cancel("cancelled", m.Cause)
	case InExited:
		l.exited(in) // not m: its copy would take room in this frame
	case InDispose:
		l.dispose(m.ID)
	case InWatch:
		more := l.extra()
		more.watchers = append(more.watchers, m.ID)
		if l.settled {
			l.fx.tellSettled(m.ID)
		}
	case InCrash:
		l.crash(m.Reason, m.At)
	case InStopped:
		l.stopped()
	}
	return l.fx.list
}

// Release gives back the effects of the last Step, which must have been
// carried out: a Lifecycle that steps rarely (a run, between messages)
// need not keep them. The next Step takes them, or others, again.
func (l *Lifecycle) Release() {
	fx := l.fx
	if fx == nil {
		return
	}
	l.fx = nil
	fx.reset()
	fx.cancel, fx.deliver, fx.relaunch = CancelChild{}, Deliver{}, Relaunch{}
	spareEffects.Put(fx)
}

func (l *Lifecycle) steer(id string, content []subagent.ContentBlock) {
	if reason := l.closedReason(); reason != "" {
		l.fx.answerSteer(id, false, reason)
		return
	}
	l.steers = append(l.steers, pendingSteer{id, content})
}

func (l *Lifecycle) withdraw(id string) {
	for i, s := range l.steers {
		if s.id == id {
			l.steers = slices.Delete(l.steers, i, i+1)
			l.fx.answerSteer(id, false, "withdrawn")
			return
		}
	}
}

func (l *Lifecycle) take(id string) {
	if l.restarting || l.closedReason() != "" {
		l.fx.deliverSnapshot(id, nil, true)
		return
	}
	var steers [][]subagent.ContentBlock
	if len(l.steers) > 0 {
		steers = make([][]subagent.ContentBlock, len(l.steers))
		for i, s := range l.steers {
			steers[i] = s.content
		}
	}
	// The child gets its snapshot before the senders learn of admission.
	l.fx.deliverSnapshot(id, steers, false)
	for _, s := range l.steers {
		l.fx.answerSteer(s.id, true, "")
	}
	l.dropSteers()
}

func (l *Lifecycle) dispose(id string) {
	if id != "" {
		m := l.extra()
		m.acks = append(m.acks, id)
	}
	if l.disposing {
		return
	}
	l.disposing = true
	if l.childLive {
		l.cancel("disposing", ErrDisposing)
		return
	}
	l.fx.add(StopSelf{})
}

func (l *Lifecycle) crash(reason string, at time.Time) {
	if l.mayRelaunch(at) {
		// Stop the child; its exit relaunches it. Pending steers
		// wait for the relaunched child's first snapshot.
		l.restarting = true
		l.fx.cancelChild(errRelaunch)
		return
	}
	crash := &CrashError{Reason: reason}
	l.restarting = false // a crash beyond the budget gives up a pending relaunch
	l.cancel("run crashed", crash)
	if !l.settled {
		l.settleStopped(subagent.Error, crash)
	}
}

// stopped handles the actor's stop: whatever is still open is closed, and
// everyone waiting for quiescence is released.
func (l *Lifecycle) stopped() {
	l.refuseSteers("run stopped")
	if l.childLive && !l.cancelled {
		l.cancelled, l.cause = true, ErrStopped
		l.fx.cancelChild(ErrStopped)
	}
	if !l.settled {
		l.settleStopped(subagent.Aborted, ErrStopped)
	}
	l.disposed = true
	l.fx.add(Quiesced{})
	for _, id := range l.watchers() {
		l.fx.tellQuiesced(id)
	}
	for _, id := range l.acks() {
		l.fx.tellQuiesced(id)
	}
}

// exited handles the end of the child's goroutine (in is an InExited): a
// relaunch, a settle, or nothing more than a stop under Dispose. It takes
// the input as Step got it, so the copy of this large one is in this
// frame rather than in Step's.
func (l *Lifecycle) exited(in Input) {
	e := in.(InExited)
	l.childLive = false
	// A child stopped for a relaunch that still finished its work keeps
	// its answer; one that aborted, or panicked within budget, relaunches.
	finished := e.Panic == "" && e.Err == nil && e.Result.StopReason != subagent.Aborted
	restarting := l.restarting
	l.restarting = false
	if (restarting && !finished || e.Panic != "" && l.mayRelaunch(e.At)) && !l.cancelled && !l.disposing {
		l.childLive = true
		m := l.extra()
		m.attempts++
		l.fx.relaunchChild(m.attempts)
		return
	}
	l.refuseSteers("child exited")
	if !l.settled {
		l.exitSettle(&e)
	}
	if l.disposing {
		l.fx.add(StopSelf{})
	}
}

// mayRelaunch reports whether a crash at now is within the restart budget,
// and if so counts it.
func (l *Lifecycle) mayRelaunch(now time.Time) bool {
	if !l.relaunchable || l.settled || l.cancelled || l.disposing || l.restarting || l.policy.Max <= 0 {
		return false
	}
	m := l.extra()
	recent := m.crashes[:0]
	for _, t := range m.crashes {
		if now.Sub(t) < l.policy.Window {
			recent = append(recent, t)
		}
	}
	m.crashes = recent
	if len(m.crashes) >= l.policy.Max {
		return false
	}
	m.crashes = append(m.crashes, now)
	return true
}

// settle emits the Settle its caller filled in, then tells every watcher.
func (l *Lifecycle) settle() {
	l.settled = true
	l.fx.add(&l.result)
	for _, id := range l.watchers() {
		l.fx.tellSettled(id)
	}
}

// settleStopped settles with reason, cause and its message as the detail.
func (l *Lifecycle) settleStopped(reason subagent.StopReason, cause error) {
	s := &l.result
	s.Result = subagent.Stopped(reason, cause.Error())
	s.Result.Cause, s.Err = cause, nil
	l.settle()
}

// closedReason says why no more steers are admitted, or "" while they are.
// QuietTake reports whether a Take now would be answered with an open
// snapshot and nothing in it: no steer waits, and the run is neither
// closing nor restarting its child.
func (l *Lifecycle) QuietTake() bool {
	return len(l.steers) == 0 && !l.restarting && l.closedReason() == ""
}

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

func (l *Lifecycle) cancel(reason string, cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	l.refuseSteers(reason)
	if l.childLive && !l.cancelled {
		l.cancelled, l.cause = true, cause
		l.fx.cancelChild(cause)
	}
}

// exitSettle settles a child that exited unsettled. Cancel wins: a child
// cancelled before its exit was handled settles aborted, even if its last
// turn completed or its transport failed after the cancel, since the
// caller who cancelled must not act on an unconfirmed answer; the cancel's
// cause (a deadline, say) is the result's Cause unless the child named one.
func (l *Lifecycle) exitSettle(in *InExited) {
	s := &l.result
	switch {
	case l.cancelled:
		s.Result, s.Err = in.Result, nil
		res := &s.Result
		if res.StopReason != subagent.Aborted || in.Err != nil || in.Panic != "" {
			res.StopReason, res.Detail, res.Cause = subagent.Aborted, l.cause.Error(), l.cause
		} else if res.Cause == nil {
			res.Cause = l.cause
		}
		l.settle()
	case in.Panic != "":
		l.settleStopped(subagent.Error, &CrashError{Reason: "child panicked: " + in.Panic})
	default:
		s.Result, s.Err = in.Result, in.Err
		l.settle()
	}
}

// refuseSteers answers every pending steer with reason.
func (l *Lifecycle) refuseSteers(reason string) {
	for _, s := range l.steers {
		l.fx.answerSteer(s.id, false, reason)
	}
	l.dropSteers()
}

// dropSteers empties the pending steers, keeping their array for the next.
func (l *Lifecycle) dropSteers() {
	clear(l.steers)
	l.steers = l.steers[:0]
}
