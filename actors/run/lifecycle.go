package run

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/subactor/subactor/subagent"
)

// Inputs to the lifecycle. IDs name the sender that awaits an answer.
type (
	input interface{ input() }

	inSteer struct {
		ID      string
		Content []subagent.ContentBlock
	}
	inWithdraw struct{ ID string }
	inTake     struct{ ID string }
	// inCancel asks the child to stop; Cause is why (a deadline, say).
	inCancel struct{ Cause error }
	// inExited: the child's goroutine returned. Panic is what it panicked
	// with, "" when it returned; At is when.
	inExited struct {
		Result subagent.Result
		Err    error
		Panic  string
		At     time.Time
	}
	// inDispose asks for the run's end; ID, when set, is a sender to
	// acknowledge once quiesced.
	inDispose struct{ ID string }
	// inWatch adds a watcher to tell of the settle and of quiescence.
	inWatch struct{ ID string }
	// inCrash: the actor itself panicked handling a message.
	inCrash struct {
		Reason string
		At     time.Time
	}
	inStopped struct{}
	// inRestart: the supervisor's Restart directive after an escalated
	// crash (the actor started again).
	inRestart struct{}
	// inResume: the actor handles messages again after an escalated
	// crash; unless a restart came first, the directive was Resume.
	inResume struct{}
)

func (inSteer) input()    {}
func (inWithdraw) input() {}
func (inTake) input()     {}
func (inCancel) input()   {}
func (inExited) input()   {}
func (inDispose) input()  {}
func (inWatch) input()    {}
func (inCrash) input()    {}
func (inStopped) input()  {}
func (inRestart) input()  {}
func (inResume) input()   {}

// effects the actor carries out, in order. Step returns those that carry
// data as pointers (*settle, *deliver, ...), and the zero-size ones
// (stopSelf, quiesce) as values.
type (
	effect interface{ effect() }

	// cancelChild cancels the context of the goroutine the run owns with
	// Cause.
	cancelChild struct{ Cause error }
	// answerSteer tells a steer's sender whether the child admitted it.
	answerSteer struct {
		ID       string
		Admitted bool
		Reason   string
	}
	// deliver answers the child's TakeSnapshot. Closed forbids another
	// model request.
	deliver struct {
		ID     string
		Steers [][]subagent.ContentBlock
		Closed bool
	}
	// settle fixes the result; the lifecycle emits it exactly once.
	settle struct {
		Result subagent.Result
		Err    error
	}
	// tellSettled sends the settled result to a watcher.
	tellSettled struct{ ID string }
	// relaunchChild starts the child again from its last checkpoint; Attempt
	// counts relaunches from 1.
	relaunchChild struct{ Attempt int }
	// stopSelf stops the actor: the child has exited under Dispose.
	stopSelf struct{}
	// quiesce releases every Dispose, past and future: the child was
	// stopped and the actor has stopped.
	quiesce struct{}
	// tellQuiesced tells a watcher, or acknowledges a Dispose, once
	// quiesced.
	tellQuiesced struct{ ID string }
	// escalate hands a crash to the run actor's supervisor (its parent
	// actor's SupervisorStrategy), whose directive comes back as
	// inRestart, inResume or inStopped.
	escalate struct{ Cause *CrashError }
)

func (*cancelChild) effect()   {}
func (*answerSteer) effect()   {}
func (*deliver) effect()       {}
func (*settle) effect()        {}
func (*tellSettled) effect()   {}
func (*relaunchChild) effect() {}
func (stopSelf) effect()       {}
func (quiesce) effect()        {}
func (*tellQuiesced) effect()  {}
func (*escalate) effect()      {}

func (l *lifecycle) emit(f effect) { l.out = append(l.out, f) }

func (l *lifecycle) answerSteer(id string, admitted bool, reason string) {
	l.emit(&answerSteer{ID: id, Admitted: admitted, Reason: reason})
}

type pendingSteer struct {
	id      string
	content []subagent.ContentBlock
}

// lifecycle is the run's state machine. It does no I/O: Step takes one input
// and returns the effects to carry out, so every transition can be tested
// without actors or goroutines.
// Its result, once settled, stays in the lifecycle.
type lifecycle struct {
	settled, disposing, disposed bool
	childLive, cancelled         bool
	relaunchable                 bool
	restarting                   bool  // the child is being stopped to relaunch
	cause                        error // why the child was cancelled
	steers                       []pendingSteer
	// more is what few runs need, made on first use: wire watchers and
	// disposers, and a crash awaiting its supervisor's directive. Every
	// parked child has a lifecycle (issue 11).
	more *lifeMore

	// out is the effects of the Step in progress. outBuf backs it: a step
	// has one or two effects, and a slice made per step was three
	// allocations a delegation.
	out    []effect
	outBuf [2]effect
	result settle // the settle effect, emitted once
}

type lifeMore struct {
	watchers []string    // told of the settle and of quiescence
	acks     []string    // disposers told of quiescence
	failed   *CrashError // escalated, awaiting the supervisor's directive
	attempts int
}

func (l *lifecycle) extra() *lifeMore {
	if l.more == nil {
		l.more = new(lifeMore)
	}
	return l.more
}

// Causes of a cancellation the lifecycle makes itself.
var (
	errDisposing = errors.New("run: disposing")
	errStopped   = errors.New("run: actor stopped")
	errRelaunch  = errors.New("run: relaunching after a crash")
)

// CrashError is the failure a run actor escalates to its supervisor when
// its child or the actor itself crashed, and the cause of the run's
// error settle when the supervisor stops it or has no checkpoint to
// restart it from.
type CrashError struct{ Reason string }

func (e *CrashError) Error() string { return "run crashed: " + e.Reason }

// newLifecycle starts with the child's goroutine running. A
// relaunchable run (one with a relaunch body) relaunches its child when
// its supervisor restarts it after a crash.
func newLifecycle(relaunchable bool) *lifecycle {
	l := new(lifecycle)
	l.init(relaunchable)
	return l
}

// init is newLifecycle for a lifecycle allocated with the run it belongs to.
func (l *lifecycle) init(relaunchable bool) {
	l.childLive, l.relaunchable = true, relaunchable
}

// Step applies one input and returns the effects to carry out, in order,
// valid until the next Step. The *settle is the lifecycle's result.
func (l *lifecycle) step(in input) []effect {
	clear(l.outBuf[:]) // what the last step's effects referred to is not kept
	l.out = l.outBuf[:0]
	if l.disposed {
		if d, ok := in.(inDispose); ok && d.ID != "" {
			l.emit(&tellQuiesced{ID: d.ID})
		}
		return l.out
	}
	switch m := in.(type) {
	case inSteer:
		l.steer(m.ID, m.Content)
	case inWithdraw:
		l.withdraw(m.ID)
	case inTake:
		l.take(m.ID)
	case inCancel:
		l.cancel("cancelled", m.Cause)
	case inExited:
		l.exited(m)
	case inDispose:
		l.dispose(m.ID)
	case inWatch:
		more := l.extra()
		if slices.Contains(more.watchers, m.ID) {
			break // told once
		}
		more.watchers = append(more.watchers, m.ID)
		if l.settled {
			l.emit(&tellSettled{ID: m.ID})
		}
	case inCrash:
		l.crash(&CrashError{Reason: m.Reason})
	case inStopped:
		l.stopped()
	case inRestart:
		l.restart()
	case inResume:
		l.resume()
	}
	return l.out
}

func (l *lifecycle) steer(id string, content []subagent.ContentBlock) {
	if reason := l.closedReason(); reason != "" {
		l.answerSteer(id, false, reason)
		return
	}
	l.steers = append(l.steers, pendingSteer{id, content})
}

func (l *lifecycle) withdraw(id string) {
	for i, s := range l.steers {
		if s.id == id {
			l.steers = slices.Delete(l.steers, i, i+1)
			l.answerSteer(id, false, "withdrawn")
			return
		}
	}
}

func (l *lifecycle) take(id string) {
	if l.restarting || l.closedReason() != "" {
		l.emit(&deliver{ID: id, Closed: true})
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
	l.emit(&deliver{ID: id, Steers: steers})
	for _, s := range l.steers {
		l.answerSteer(s.id, true, "")
	}
	l.steers = nil
}

func (l *lifecycle) dispose(id string) {
	if id != "" {
		// A wire disposer; the local handle (no id) waits on its latch.
		if m := l.extra(); !slices.Contains(m.acks, id) && !slices.Contains(m.watchers, id) {
			m.acks = append(m.acks, id) // a watcher is told of quiescence as it is
		}
	}
	if l.disposing {
		return
	}
	l.disposing = true
	if l.childLive {
		l.cancel("disposing", errDisposing)
		return
	}
	l.emit(stopSelf{})
}

// crash escalates a crash of the child or of the actor to the run's
// supervisor, unless the run is already ending: then it settles error.
// Pending steers wait for the directive.
func (l *lifecycle) crash(crash *CrashError) {
	if l.settled || l.cancelled || l.disposing {
		l.cancel("run crashed", crash)
		if !l.settled {
			l.settleStopped(subagent.Error, crash)
		}
		return
	}
	l.extra().failed = crash
	l.emit(&escalate{Cause: crash})
}

// failed returns the crash awaiting a directive and forgets it, or nil.
func (l *lifecycle) takeFailed() *CrashError {
	if l.more == nil {
		return nil
	}
	f := l.more.failed
	l.more.failed = nil
	return f
}

// restart carries out the supervisor's Restart: the child continues from
// its last checkpoint (a live one is stopped first; its exit relaunches
// it). A run without a checkpoint to relaunch from settles error.
func (l *lifecycle) restart() {
	crash := l.takeFailed()
	if crash == nil {
		return
	}
	switch {
	case !l.relaunchable:
		l.cancel("run crashed", crash)
		l.refuseSteers("run crashed")
		l.settleStopped(subagent.Error, &CrashError{Reason: crash.Reason + "; no checkpoint to restart from"})
	case l.childLive:
		l.restarting = true
		l.emit(&cancelChild{Cause: errRelaunch})
	default:
		l.relaunch()
	}
}

// resume carries out the supervisor's Resume: a live child goes on; a
// dead one cannot, and the run settles error.
func (l *lifecycle) resume() {
	crash := l.takeFailed()
	if crash == nil || l.childLive {
		return
	}
	l.refuseSteers("run crashed")
	l.settleStopped(subagent.Error, crash)
}

func (l *lifecycle) relaunch() {
	l.childLive = true
	m := l.extra()
	m.attempts++
	l.emit(&relaunchChild{Attempt: m.attempts})
}

// stopped handles the actor's stop: whatever is still open is closed, and
// everyone waiting for quiescence is released.
func (l *lifecycle) stopped() {
	l.refuseSteers("run stopped")
	if l.childLive && !l.cancelled {
		l.cancelled, l.cause = true, errStopped
		l.emit(&cancelChild{Cause: errStopped})
	}
	if crash := l.takeFailed(); crash != nil && !l.settled {
		l.settleStopped(subagent.Error, crash) // the supervisor's Stop
	}
	if !l.settled {
		l.settleStopped(subagent.Aborted, errStopped)
	}
	l.disposed = true
	l.emit(quiesce{})
	if m := l.more; m != nil {
		for _, id := range m.watchers {
			l.emit(&tellQuiesced{ID: id})
		}
		for _, id := range m.acks {
			if !slices.Contains(m.watchers, id) { // watching since the Dispose
				l.emit(&tellQuiesced{ID: id})
			}
		}
	}
}

// exited handles the end of the child's goroutine: a relaunch the
// supervisor ordered, an escalated crash, a settle, or nothing more than a
// stop under Dispose.
func (l *lifecycle) exited(e inExited) {
	l.childLive = false
	// A child stopped for a relaunch that still finished its work keeps
	// its answer; one that aborted relaunches.
	finished := e.Panic == "" && e.Err == nil && e.Result.StopReason != subagent.Aborted
	restarting := l.restarting
	l.restarting = false
	ending := l.settled || l.cancelled || l.disposing
	var crashed *CrashError
	switch {
	case restarting && !finished && !ending:
		l.relaunch()
		return
	case e.Panic != "" && !ending:
		l.crash(&CrashError{Reason: "child panicked: " + e.Panic})
		return
	case errors.As(e.Err, &crashed) && !ending:
		l.crash(crashed)
		return
	}
	l.refuseSteers("child exited")
	if !l.settled {
		l.exitSettle(&e)
	}
	if l.disposing {
		l.emit(stopSelf{})
	}
}

// settle emits the settle its caller filled in, then tells every watcher.
func (l *lifecycle) settle() {
	l.settled = true
	l.emit(&l.result)
	if l.more != nil {
		for _, id := range l.more.watchers {
			l.emit(&tellSettled{ID: id})
		}
	}
}

// settleStopped settles with reason, cause and its message as the detail.
func (l *lifecycle) settleStopped(reason subagent.StopReason, cause error) {
	s := &l.result
	s.Result = subagent.Result{StopReason: reason, Detail: cause.Error()}
	s.Result.Cause, s.Err = cause, nil
	l.settle()
}

// quietTake reports whether a Take now would be answered with an open
// snapshot and nothing in it: no steer waits, and the run is neither
// closing nor restarting its child.
func (l *lifecycle) quietTake() bool {
	return len(l.steers) == 0 && !l.restarting && l.closedReason() == ""
}

// closedReason says why no more steers are admitted, or "" while they are.
func (l *lifecycle) closedReason() string {
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

func (l *lifecycle) cancel(reason string, cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	l.refuseSteers(reason)
	if l.childLive && !l.cancelled {
		l.cancelled, l.cause = true, cause
		l.emit(&cancelChild{Cause: cause})
	}
}

// exitSettle settles a child that exited unsettled. Cancel wins: a child
// cancelled before its exit was handled settles aborted, even if its last
// turn completed or its transport failed after the cancel, since the
// caller who cancelled must not act on an unconfirmed answer; the cancel's
// cause (a deadline, say) is the result's Cause unless the child named one.
func (l *lifecycle) exitSettle(in *inExited) {
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
func (l *lifecycle) refuseSteers(reason string) {
	for _, s := range l.steers {
		l.answerSteer(s.id, false, reason)
	}
	l.steers = nil
}
