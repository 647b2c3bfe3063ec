package tasks

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/subactor/subactor/subagent"
)

// TestT3_TaskLifecycleProperties drives one task's lifecycle with random
// attaches, settles, kills, waits and unwaits, and checks: the state is
// Running, then Stopping once killed, and leaves them once, never to
// change; a kill before the settle makes it Killed (kill wins), as does an
// aborted run, and neither keeps output; a kill asks for exactly one stop:
// a cancelled start before the run is attached, a dispose after (at
// once, or when the run attaches); every waiter still waiting is answered
// exactly once, and only once the task has settled.
func TestT3_TaskLifecycleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := newLifecycle()
		var (
			waiting          = map[string]bool{}
			answered         = map[string]int{}
			disposes, cancel int
			attached, killed bool
			settled          bool
			final            State
			next             int
		)
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			var fx []effect
			switch rapid.IntRange(0, 4).Draw(t, "input") {
			case 0:
				reason := rapid.SampledFrom([]subagent.StopReason{subagent.Completed, subagent.Error, subagent.Aborted}).Draw(t, "reason")
				res := subagent.Result{StopReason: reason}
				res.Output = []subagent.ContentBlock{subagent.Text("out")}
				fx = l.step(inSettled{result: res})
				if !settled {
					settled = true
					switch {
					case killed || reason == subagent.Aborted:
						final = Killed
					case reason == subagent.Completed:
						final = Completed
					default:
						final = Failed
					}
					if final == Killed && l.result.Output != nil {
						t.Fatalf("a killed task kept its output")
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
			case 4:
				fx = l.step(inAttached{})
				if !settled {
					attached = true
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
					if !attached {
						t.Fatalf("a dispose asked with no run attached")
					}
					disposes++
				case cancelStart:
					if attached {
						t.Fatalf("a start cancelled after its run attached")
					}
					cancel++
				}
			}
			switch {
			case settled && l.state != final:
				t.Fatalf("state %s, want %s", l.state, final)
			case !settled && killed && l.state != Stopping:
				t.Fatalf("state %s after a kill, want stopping", l.state)
			case !settled && !killed && l.state != Running:
				t.Fatalf("state %s before any settle or kill", l.state)
			}
		}
		if disposes > 1 || cancel > 1 {
			t.Fatalf("%d disposes and %d cancelled starts asked", disposes, cancel)
		}
		if killed && attached && !settled && disposes != 1 {
			t.Fatalf("a killed task with its run attached asked %d disposes", disposes)
		}
		if killed && !attached && !settled && cancel != 1 {
			t.Fatalf("a killed task with no run yet cancelled %d starts", cancel)
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
