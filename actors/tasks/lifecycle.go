package tasks

import (
	"slices"

	"github.com/subactor/subactor/subagent"
)

// State is where a background task is.
type State string

// Task states. A task is Running from the moment it is recorded (before
// its child starts) until its run settled and was disposed; Stopping
// once a kill was asked and the run has not settled yet. It ends
// Completed when its run completed; Killed when it was killed (a kill wins
// over a run that settles meanwhile) or its run was aborted; Failed
// otherwise (a failed start among them). Interrupted is how a task reads
// that was running in a process that ended before it settled.
const (
	Running     State = "running"
	Stopping    State = "stopping"
	Completed   State = "completed"
	Failed      State = "failed"
	Killed      State = "killed"
	Interrupted State = "interrupted"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool { return s != Running && s != Stopping }

// lifecycle is one task's state machine: pure, so that every order of
// attach, settle, kill and waits can be tested without actors.
type lifecycle struct {
	state    State
	attached bool // the run is there (its start returned it)
	killed   bool // a kill was asked while running
	result   subagent.Result
	err      string
	waiters  []string
}

// Inputs and effects of the lifecycle.
type (
	input  interface{ input() }
	effect interface{ effect() }

	// inAttached: the start returned the run.
	inAttached struct{}
	// inSettled: the run settled and was disposed, or the start failed
	// (no run); err is an infrastructure fault or the start's error.
	inSettled struct {
		result subagent.Result
		err    string
	}
	inKill   struct{}
	inWait   struct{ id string }
	inUnwait struct{ id string } // the waiter stopped waiting

	// answer tells a waiter the task's settled state.
	answer struct{ id string }
	// dispose asks for the task's run to be disposed (a kill).
	dispose struct{}
	// cancelStart asks for the task's pending start to be cancelled (a
	// kill before the run is there).
	cancelStart struct{}
)

func (inAttached) input()   {}
func (inSettled) input()    {}
func (inKill) input()       {}
func (inWait) input()       {}
func (inUnwait) input()     {}
func (answer) effect()      {}
func (dispose) effect()     {}
func (cancelStart) effect() {}

func newLifecycle() *lifecycle { return &lifecycle{state: Running} }

func (l *lifecycle) step(in input) []effect {
	switch in := in.(type) {
	case inAttached:
		if l.attached || l.state.Terminal() {
			return nil
		}
		l.attached = true
		if l.killed {
			return []effect{dispose{}}
		}
	case inSettled:
		if l.state.Terminal() {
			return nil // a run settles once; nothing after
		}
		l.result, l.err = in.result, in.err
		switch {
		case l.killed || in.err == "" && in.result.StopReason == subagent.Aborted:
			// Killed, or cancelled some other way: no output either way.
			l.state = Killed
			l.result.Output, l.result.Structured = nil, nil
		case in.err == "" && in.result.StopReason == subagent.Completed:
			l.state = Completed
		default:
			l.state = Failed
		}
		fx := make([]effect, len(l.waiters))
		for i, w := range l.waiters {
			fx[i] = answer{w}
		}
		l.waiters = nil
		return fx
	case inKill:
		if l.state.Terminal() || l.killed {
			return nil
		}
		l.killed = true
		l.state = Stopping
		if l.attached {
			return []effect{dispose{}}
		}
		return []effect{cancelStart{}}
	case inWait:
		if l.state.Terminal() {
			return []effect{answer{in.id}}
		}
		l.waiters = append(l.waiters, in.id)
	case inUnwait:
		l.waiters = slices.DeleteFunc(l.waiters, func(w string) bool { return w == in.id })
	}
	return nil
}
