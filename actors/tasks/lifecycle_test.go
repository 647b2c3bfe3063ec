package tasks

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/subactor/subactor/subagent"
)

// TestT3_TaskLifecycleProperties drives one task's lifecycle with random
// settles, kills, waits and unwaits, and checks: the state leaves Running
// once and never changes after; a kill before the settle makes it Killed
// (kill wins) and asks for one dispose at most; every waiter still waiting
// is answered exactly once, and only once the task has settled.
func TestT3_TaskLifecycleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := newLifecycle()
		var (
			waiting  = map[string]bool{}
			answered = map[string]int{}
			disposes int
			killed   bool
			settled  bool
			final    State
			next     int
		)
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			var fx []effect
			switch rapid.IntRange(0, 3).Draw(t, "input") {
			case 0:
				reason := rapid.SampledFrom([]subagent.StopReason{subagent.Completed, subagent.Error, subagent.Aborted}).Draw(t, "reason")
				fx = l.step(inSettled{result: subagent.Stopped(reason, "")})
				if !settled {
					settled = true
					switch {
					case killed:
						final = Killed
					case reason == subagent.Completed:
						final = Completed
					default:
						final = Failed
					}
				}
			case 1:
				fx = l.step(inKill{})
				if !settled {
					killed = true
				}
			case 2:
				next++
				id := fmt.Sprint("w", next)
				waiting[id] = true
				fx = l.step(inWait{id: id})
			case 3:
				for id := range waiting {
					delete(waiting, id)
					l.step(inUnwait{id: id})
					break
				}
			}
			for _, f := range fx {
				switch f := f.(type) {
				case answer:
					if !settled {
						t.Fatalf("waiter %s answered before the settle", f.id)
					}
					if !waiting[f.id] {
						t.Fatalf("answered %s, which does not wait", f.id)
					}
					answered[f.id]++
					delete(waiting, f.id)
				case dispose:
					disposes++
				}
			}
			if settled && l.state != final {
				t.Fatalf("state %s, want %s", l.state, final)
			}
			if !settled && l.state != Running {
				t.Fatalf("state %s before any settle", l.state)
			}
		}
		if disposes > 1 {
			t.Fatalf("%d disposes asked", disposes)
		}
		for id, n := range answered {
			if n != 1 {
				t.Fatalf("waiter %s answered %d times", id, n)
			}
		}
		if settled && len(waiting) > 0 {
			t.Fatalf("waiters left after the settle: %v", waiting)
		}
	})
}
