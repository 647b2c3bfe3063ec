package tasks

import (
	"slices"

	"github.com/subactor/subactor/subagent"
)

// State is where a background task is.
type State string

// Task states. A task is Running until its run settles: Completed when it
// completed, Killed when it was killed before (kill wins, as cancel wins
// for a run), Failed otherwise.
const (
	Running   State = "running"
	Completed State = "completed"
	Failed    State = "failed"
	Killed    State = "killed"
)

// lifecycle is one task's state machine: pure, so that every order of
// settle, kill and waits can be tested without actors.
type lifecycle struct {
	state   State
	killed  bool // a kill was asked while running
	result  subagent.Result
	err     string
	waiters []string
}

// Inputs and effects of the lifecycle.
type (
	input  interface{ input() }
	effect interface{ effect() }

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
)

func (inSettled) input() {}
func (inKill) input()    {}
func (inWait) input()    {}
func (inUnwait) input()  {}
func (answer) effect()   {}
func (dispose) effect()  {}

func newLifecycle() *lifecycle { return &lifecycle{state: Running} }

func (l *lifecycle) step(in input) []effect {
	switch in := in.(type) {
	case inSettled:
		if l.state != Running {
			return nil // a run settles once; nothing after
		}
		l.result, l.err = in.result, in.err
		switch {
		case l.killed:
			l.state = Killed
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
		if l.state != Running || l.killed {
			return nil
		}
		l.killed = true
		return []effect{dispose{}}
	case inWait:
		if l.state != Running {
			return []effect{answer{in.id}}
		}
		l.waiters = append(l.waiters, in.id)
	case inUnwait:
		l.waiters = slices.DeleteFunc(l.waiters, func(w string) bool { return w == in.id })
	}
	return nil
}
