package run

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/subactor/subactor/subagent"
)

// TestR2R4R3_LifecycleProperties drives the pure lifecycle with random input
// sequences shaped like what the actor can receive, and checks the promises
// every sequence must keep: the result settles exactly once (R2); a steer is
// admitted only into a snapshot the child took, is answered exactly once and
// never after cancellation (R4); Dispose releases its callers only once the
// child has exited and the actor stopped (R3); cancel wins over whatever the
// child reports after it (S5).
func TestR2R4R3_LifecycleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := newLifecycle(false)
		var (
			next              int
			pendingSteers     []string // sent, not yet answered
			answered          = map[string]bool{}
			settles, cancels  int
			childLive         = true
			cancelled         bool
			stopRequested     bool
			stopped           bool
			quiesced          bool
			disposeAsked      bool
			admittedSinceTake []string
		)
		id := func(kind string) string { next++; return fmt.Sprintf("%s-%d", kind, next) }
		apply := func(in input) []effect {
			fx := l.step(in)
			admittedSinceTake = nil
			for _, f := range fx {
				switch f := f.(type) {
				case *settle:
					settles++
					// Cancel wins: after a cancel, an exit settles aborted,
					// whatever the child reported (S5).
					if _, exit := in.(inExited); exit && cancelled && (f.Err != nil || f.Result.StopReason != subagent.Aborted) {
						t.Fatalf("exit after a cancel settled %v, %v", f.Result.StopReason, f.Err)
					}
				case *cancelChild:
					cancels++
					cancelled = true
				case *answerSteer:
					if answered[f.ID] {
						t.Fatalf("steer %s answered twice", f.ID)
					}
					if !slices.Contains(pendingSteers, f.ID) {
						t.Fatalf("answer for unknown steer %s", f.ID)
					}
					answered[f.ID] = true
					pendingSteers = slices.DeleteFunc(pendingSteers, func(s string) bool { return s == f.ID })
					if f.Admitted {
						if _, take := in.(inTake); !take {
							t.Fatalf("steer %s admitted outside a snapshot (input %T)", f.ID, in)
						}
						admittedSinceTake = append(admittedSinceTake, f.ID)
					}
				case *deliver:
					if !f.Closed && (cancelled || !childLive) {
						t.Fatalf("open snapshot delivered after cancellation")
					}
				case stopSelf:
					if childLive {
						t.Fatalf("stopped while the child still runs")
					}
					stopRequested = true
				case quiesce:
					if quiesced {
						t.Fatalf("quiesced twice")
					}
					quiesced = true
					if childLive {
						t.Fatalf("quiesced while the child still runs")
					}
				}
			}
			return fx
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			if stopRequested && !stopped {
				apply(inStopped{})
				stopped = true
				continue
			}
			if stopped {
				if fx := l.step(inDispose{}); len(fx) != 0 {
					t.Fatalf("input after stop had effects: %v", fx)
				}
				continue
			}
			switch rapid.IntRange(0, 7).Draw(t, "input") {
			case 0:
				apply(inTake{ID: "take"})
			case 1:
				s := id("steer")
				pendingSteers = append(pendingSteers, s)
				apply(inSteer{ID: s, Content: []subagent.ContentBlock{subagent.Text(s)}})
			case 2:
				if len(pendingSteers) > 0 {
					s := rapid.SampledFrom(pendingSteers).Draw(t, "withdraw")
					apply(inWithdraw{ID: s})
					if !answered[s] {
						t.Fatalf("withdrawn steer %s left unanswered", s)
					}
				}
			case 3:
				if childLive {
					// A quiet Take is one the child may skip (Gate.Take):
					// it is answered with an open, empty snapshot and
					// nothing else, and only such a Take is.
					quiet := l.quietTake()
					fx := apply(inTake{ID: id("take")})
					var d *deliver
					if len(fx) == 1 {
						d, _ = fx[0].(*deliver)
					}
					if empty := d != nil && d.Steers == nil && !d.Closed; quiet != empty {
						t.Fatalf("quietTake %v before a Take whose effects were %v", quiet, fx)
					}
				}
			case 4:
				apply(inCancel{})
			case 5:
				if childLive {
					childLive = false
					exit := rapid.SampledFrom([]inExited{
						{Result: subagent.Result{StopReason: subagent.Completed}},
						{Result: subagent.Result{StopReason: subagent.Error, Detail: "transport"}},
						{Err: errors.New("connection reset")},
					}).Draw(t, "exit")
					apply(exit)
					if len(pendingSteers) > 0 {
						t.Fatalf("steers left pending after the child exited: %v", pendingSteers)
					}
				}
			case 6:
				disposeAsked = true
				apply(inDispose{})
			case 7:
				apply(inCrash{Reason: "test"})
			}
			if settles > 1 || cancels > 1 {
				t.Fatalf("settled %d times, cancelled %d times", settles, cancels)
			}
		}
		if !childLive && settles != 1 {
			t.Fatalf("child exited but settled %d times", settles)
		}
		if disposeAsked && !childLive && !stopRequested {
			t.Fatalf("disposed and exited but the actor was never stopped")
		}
		if stopped && !quiesced {
			t.Fatalf("stopped without releasing Dispose")
		}
	})
}

// values is what fx points to, to compare with effect values.
func values(fx []effect) []any {
	vs := make([]any, len(fx))
	for i, f := range fx {
		vs[i] = f
		if v := reflect.ValueOf(f); v.Kind() == reflect.Pointer {
			vs[i] = v.Elem().Interface()
		}
	}
	return vs
}

// Contract R4.
func TestR4_LifecycleAdmitsSteerIntoNextSnapshotOnly(t *testing.T) {
	l := newLifecycle(false)
	if fx := l.step(inSteer{ID: "s1", Content: []subagent.ContentBlock{subagent.Text("hi")}}); len(fx) != 0 {
		t.Fatalf("steer answered before a snapshot: %v", fx)
	}
	fx := l.step(inTake{ID: "t1"})
	want := []any{
		deliver{ID: "t1", Steers: [][]subagent.ContentBlock{{subagent.Text("hi")}}},
		answerSteer{ID: "s1", Admitted: true},
	}
	if fmt.Sprint(values(fx)) != fmt.Sprint(want) {
		t.Fatalf("take: got %v, want %v", fx, want)
	}
	fx = l.step(inSteer{ID: "s2"})
	if len(fx) != 0 {
		t.Fatalf("steer while running answered early: %v", fx)
	}
	fx = l.step(inExited{Result: subagent.Result{StopReason: subagent.Completed}})
	if *fx[0].(*answerSteer) != (answerSteer{ID: "s2", Reason: "child exited"}) {
		t.Fatalf("steer pending at exit: got %v", fx[0])
	}
	if fx = l.step(inSteer{ID: "s3"}); *fx[0].(*answerSteer) != (answerSteer{ID: "s3", Reason: "run has settled"}) {
		t.Fatalf("steer after settle: %v", fx)
	}
}

// Contract R3.
func TestR3_LifecyclePhases(t *testing.T) {
	l := newLifecycle(false)
	if fx := l.step(inDispose{}); fmt.Sprint(values(fx)) != fmt.Sprint([]any{cancelChild{Cause: errDisposing}}) {
		t.Fatalf("dispose of a live child: %v", fx)
	}
	if fx := l.step(inDispose{}); len(fx) != 0 {
		t.Fatalf("second dispose: %v", fx)
	}
	fx := l.step(inExited{Result: subagent.Result{StopReason: subagent.Aborted}})
	aborted := subagent.Result{StopReason: subagent.Aborted}
	aborted.Cause = errDisposing
	if fmt.Sprint(values(fx)) != fmt.Sprint([]any{settle{Result: aborted}, stopSelf{}}) {
		t.Fatalf("exit under dispose: %v", fx)
	}
	fx = l.step(inStopped{})
	if fmt.Sprint(values(fx)) != fmt.Sprint([]any{quiesce{}}) {
		t.Fatalf("stopped: %v", fx)
	}
}

// Contracts A2, A3: a crash is escalated to the supervisor, not settled
// in place; its Stop settles error with the crash as the cause, once.
func TestA3_LifecycleCrashEscalatesAndStopSettlesErrorOnce(t *testing.T) {
	l := newLifecycle(false)
	fx := l.step(inCrash{Reason: "boom"})
	if len(fx) != 1 || fx[0].(*escalate).Cause.Reason != "boom" {
		t.Fatalf("crash: %v", fx)
	}
	fx = l.step(inStopped{})
	var crash *CrashError
	if s, ok := fx[1].(*settle); !ok || s.Result.StopReason != subagent.Error || !errors.As(s.Result.Cause, &crash) || crash.Reason != "boom" {
		t.Fatalf("the supervisor's Stop must settle error with the crash: %v", fx)
	}
	if fx := l.step(inExited{Result: subagent.Result{StopReason: subagent.Completed}}); len(fx) != 0 {
		t.Fatalf("exit after the stop settled again: %v", fx)
	}
}

// Contract A3: a Restart of a run without a checkpoint settles error; of
// one with a checkpoint relaunches its child (a live one once it exits);
// a Resume lets a live child go on and settles a dead one's run error.
func TestA3_LifecycleDirectives(t *testing.T) {
	l := newLifecycle(false)
	l.step(inExited{Panic: "bug"})
	fx := l.step(inRestart{})
	if s, ok := fx[len(fx)-1].(*settle); !ok || s.Result.StopReason != subagent.Error || !strings.Contains(s.Result.Detail, "no checkpoint") {
		t.Fatalf("restart without a checkpoint: %v", fx)
	}
	l = newLifecycle(true)
	l.step(inExited{Panic: "bug"})
	if fx := l.step(inRestart{}); len(fx) != 1 || fx[0].(*relaunchChild).Attempt != 1 {
		t.Fatalf("restart of a dead child: %v", fx)
	}
	l.step(inCrash{Reason: "actor bug"})
	if fx := l.step(inRestart{}); len(fx) != 1 || !errors.Is(fx[0].(*cancelChild).Cause, errRelaunch) {
		t.Fatalf("restart of a live child must stop it first: %v", fx)
	}
	if fx := l.step(inExited{Result: subagent.Result{StopReason: subagent.Aborted}}); len(fx) != 1 || fx[0].(*relaunchChild).Attempt != 2 {
		t.Fatalf("the stopped child's exit must relaunch it: %v", fx)
	}
	l.step(inCrash{Reason: "actor bug"})
	if fx := l.step(inResume{}); len(fx) != 0 {
		t.Fatalf("resume with a live child: %v", fx)
	}
	l.step(inExited{Panic: "bug"})
	fx = l.step(inResume{})
	if s, ok := fx[len(fx)-1].(*settle); !ok || s.Result.StopReason != subagent.Error {
		t.Fatalf("resume of a dead child: %v", fx)
	}
}

// Contract S5: cancel wins. A cancel handled before the child's exit
// settles aborted with the cancel's cause, even when the child's last turn
// completed or its transport failed after the cancel; an exit handled
// before the cancel keeps its result.
func TestS5_LifecycleCancelWinsOverALateCompletionOrFault(t *testing.T) {
	for _, exit := range []inExited{
		{Result: subagent.Result{Output: []subagent.ContentBlock{subagent.Text("done")}, StopReason: subagent.Completed}},
		{Result: subagent.Result{StopReason: subagent.Error, Detail: "transport closed"}},
		{Err: errors.New("connection reset")},
	} {
		l := newLifecycle(false)
		l.step(inCancel{Cause: context.DeadlineExceeded})
		fx := l.step(exit)
		s, ok := fx[len(fx)-1].(*settle)
		if !ok || s.Err != nil || s.Result.StopReason != subagent.Aborted || !errors.Is(s.Result.Cause, context.DeadlineExceeded) {
			t.Fatalf("exit %+v after a cancel settled %+v", exit, fx)
		}
	}
	l := newLifecycle(false)
	fx := l.step(inExited{Result: subagent.Result{StopReason: subagent.Completed}})
	s := *fx[0].(*settle) // the effects are valid until the next Step
	l.step(inCancel{Cause: context.Canceled})
	if s.Result.StopReason != subagent.Completed {
		t.Fatalf("an exit before the cancel settled %v", s.Result.StopReason)
	}
}

// TestA3_LifecycleSupervisionWatchAndAckProperties drives a lifecycle with
// random crashes, child exits (some panicking), watchers, dispose
// requests and cancels, answering each escalated crash with a random
// supervisor directive (Restart, Resume, Stop) as protoactor would, and
// checks: a crash is escalated only while the run is open, and the child
// relaunches only after a Restart; the run settles at most once and
// never relaunches after it; every watcher is told of the settle exactly
// once and only after it; every watcher and every disposer that asked for
// an acknowledgement is told of quiescence exactly once, and only at it.
func TestA3_LifecycleSupervisionWatchAndAckProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		relaunchable := rapid.Bool().Draw(t, "relaunchable")
		l := newLifecycle(relaunchable)
		now := time.Unix(0, 0)
		var (
			settled          bool
			quiesced         bool
			childLive        = true
			relaunchPending  bool
			restartOrdered   bool
			escalated        bool
			stopRequested    bool
			watchers, ackers []string
			toldSettled      = map[string]int{}
			toldQuiesced     = map[string]int{}
			next             int
		)
		apply := func(in input) {
			for _, f := range l.step(in) {
				switch f := f.(type) {
				case *cancelChild:
					if errors.Is(f.Cause, errRelaunch) {
						if !restartOrdered {
							t.Fatalf("the child was stopped to relaunch without a Restart")
						}
						relaunchPending = true
					}
				case *escalate:
					if settled {
						t.Fatalf("escalated a crash after the settle")
					}
					escalated = true
				case *relaunchChild:
					if settled || !restartOrdered {
						t.Fatalf("relaunched (settled %v, restart ordered %v)", settled, restartOrdered)
					}
					restartOrdered, relaunchPending = false, false
					childLive = true
				case *settle:
					if settled {
						t.Fatalf("settled twice")
					}
					settled = true
					relaunchPending = false // a settle gives up a pending relaunch
				case *tellSettled:
					if !settled {
						t.Fatalf("watcher %s told of a settle before it", f.ID)
					}
					toldSettled[f.ID]++
				case stopSelf:
					stopRequested = true
				case quiesce:
					quiesced = true
				case *tellQuiesced:
					if !quiesced {
						t.Fatalf("%s told of quiescence before it", f.ID)
					}
					toldQuiesced[f.ID]++
				}
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond)
			if stopRequested && !quiesced {
				apply(inStopped{})
				continue
			}
			if escalated { // the mailbox is suspended until the directive
				escalated = false
				switch rapid.IntRange(0, 2).Draw(t, "directive") {
				case 0:
					restartOrdered = true
					apply(inRestart{})
					if !relaunchPending && !childLive {
						restartOrdered = false // no checkpoint: settled instead
					}
					apply(inResume{})
				case 1:
					apply(inResume{})
				case 2:
					apply(inStopped{})
				}
				continue
			}
			switch rapid.IntRange(0, 6).Draw(t, "input") {
			case 0:
				apply(inCrash{Reason: "boom", At: now})
			case 1:
				if childLive {
					childLive = false
					exit := inExited{At: now, Result: subagent.Result{StopReason: subagent.Aborted}}
					if rapid.Bool().Draw(t, "panics") {
						exit.Panic = "bug"
					} else if !relaunchPending && rapid.Bool().Draw(t, "completes") {
						exit.Result = subagent.Result{StopReason: subagent.Completed}
					}
					if relaunchPending && exit.Panic == "" && exit.Result.StopReason != subagent.Aborted {
						relaunchPending = false // finished its work: keeps its answer
					}
					apply(exit)
					if relaunchPending && !childLive {
						relaunchPending, restartOrdered = false, false // cancelled or disposed meanwhile
					}
				}
			case 2:
				if quiesced {
					continue // the actor is gone: a watch is a dead letter
				}
				next++
				w := fmt.Sprintf("watcher-%d", next)
				if len(watchers) > 0 && rapid.Bool().Draw(t, "watches again") {
					w = rapid.SampledFrom(watchers).Draw(t, "watcher") // told once all the same
				}
				watchers = append(watchers, w)
				apply(inWatch{ID: w})
			case 3:
				if quiesced {
					continue
				}
				next++
				d := fmt.Sprintf("disposer-%d", next)
				if len(watchers) > 0 && rapid.Bool().Draw(t, "a watcher disposes") {
					// A remote caller watches its run and disposes it:
					// one RunQuiesced.
					d = rapid.SampledFrom(watchers).Draw(t, "disposing watcher")
				}
				ackers = append(ackers, d)
				apply(inDispose{ID: d})
			case 4:
				apply(inCancel{Cause: context.Canceled})
			case 5:
				apply(inDispose{})
			case 6:
				apply(inTake{ID: "take"})
			}
		}
		for _, w := range watchers {
			if settled && toldSettled[w] != 1 {
				t.Fatalf("watcher %s told of the settle %d times", w, toldSettled[w])
			}
		}
		for _, id := range append(watchers, ackers...) {
			if want := map[bool]int{true: 1}[quiesced]; toldQuiesced[id] != want {
				t.Fatalf("%s told of quiescence %d times (quiesced %v)", id, toldQuiesced[id], quiesced)
			}
		}
	})
}
