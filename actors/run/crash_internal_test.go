//go:build subactortest

package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// probe is a message no run handles: when the hook sees it, every message
// sent before it has been handled.
type probe struct{ seen chan struct{} }

// watch installs a hook that records the run messages handled and closes
// a probe's channel when it comes through.
func watch(t *testing.T, onMsg func(msg any)) {
	restore := guard.SetHook(func(kind string, msg any) {
		if kind != "run" {
			return
		}
		if p, ok := msg.(probe); ok {
			close(p.seen)
			return
		}
		if onMsg != nil {
			onMsg(msg)
		}
	})
	t.Cleanup(restore)
}

// handled returns once every message sent to h before the call was handled.
func handled(t *testing.T, h *handle) {
	t.Helper()
	p := probe{seen: make(chan struct{})}
	h.sys.Root.Send(h.pid.Load(), p)
	testkit.Recv(t, p.seen, "the probe to pass the run's mailbox")
}

// parkedRun starts a run on sys whose child parks after its first
// snapshot, and returns once the child took it. The caller disposes the
// run before it shuts sys down.
func parkedRun(t *testing.T, sys *actors.System) *handle {
	t.Helper()
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: parkedBody(took)})
	testkit.Recv(t, took, "the first snapshot")
	return h.(*handle)
}

// steersArriving reports each steer as it reaches a run's mailbox.
func steersArriving(t *testing.T) <-chan struct{} {
	arrived := make(chan struct{}, 8)
	watch(t, func(msg any) {
		if _, ok := msg.(*messages.Steer); ok {
			arrived <- struct{}{}
		}
	})
	return arrived
}

func parkedBody(took chan<- struct{}) Body {
	return func(ctx context.Context, g Gate) (subagent.Result, error) {
		steers, err := g.Take(ctx)
		if err != nil {
			return subagent.Result{StopReason: subagent.Aborted, Detail: err.Error()}, nil
		}
		took <- struct{}{}
		if len(steers) > 0 {
			return subagent.Result{Output: steers[len(steers)-1], StopReason: subagent.Completed}, nil
		}
		<-ctx.Done()
		return subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled"}, nil
	}
}

// TestA2_ARealPanicInReceiveSettlesErrorAndStillDisposes injects a real
// panic inside the run actor's Receive: the run settles error, the pending
// steer is answered, the child is cancelled, and a Dispose whose own
// handling panicked still quiesces the run.
func TestA2_ARealPanicInReceiveSettlesErrorAndStillDisposes(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	var panicOn atomic.Value // the %T of the message whose handling panics
	panicOn.Store("")
	watch(t, func(msg any) {
		if name := fmt.Sprintf("%T", msg); name == panicOn.Load() {
			panic("injected in " + name)
		}
	})
	h := parkedRun(t, sys)
	panicOn.Store("*messages.SteerWithdraw") // never sent: nothing crashes yet
	handled(t, h)
	panicOn.Store("*messages.Steer")
	err := h.Steer(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("x")})
	if !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("a steer whose handling crashed the run: %v", err)
	}
	res, werr := h.Wait(testkit.Ctx(t))
	var crash *CrashError
	if werr != nil || res.StopReason != subagent.Error || !errors.As(res.Cause, &crash) || !strings.Contains(res.Detail, "injected in *messages.Steer") {
		t.Fatalf("crashed run settled %+v, %v", res, werr)
	}
	panicOn.Store("run.dispose") // the handle's
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatalf("Dispose whose handling panicked: %v", err)
	}
}

// TestR4_TwoSteersFromOneSenderAreBothAnswered: a router actor steering on
// behalf of many callers sends from one address; each steer is answered by
// its own id.
func TestR4_TwoSteersFromOneSenderAreBothAnswered(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	arrived := steersArriving(t)
	h := parkedRun(t, sys)
	defer h.Dispose(context.Background())
	answers := make(chan *messages.SteerAnswer, 2)
	root := sys.ActorSystem().Root
	router := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.Steer:
			c.Request(h.pid.Load(), m)
		case *messages.SteerAnswer:
			answers <- m
		}
	}))
	defer root.Stop(router)
	root.Send(router, &messages.Steer{SteerId: 1, Content: wire.FromContent([]subagent.ContentBlock{subagent.Text("one")})})
	root.Send(router, &messages.Steer{SteerId: 2, Content: wire.FromContent([]subagent.ContentBlock{subagent.Text("two")})})
	// The parked child asks again only once cancelled; a Take from here
	// admits both steers into one snapshot.
	testkit.Recv(t, arrived, "the first steer to reach the run")
	testkit.Recv(t, arrived, "the second steer to reach the run")
	reply := make(chan snapshot, 1)
	root.Send(h.pid.Load(), takeSnapshot{reply: reply})
	snap := testkit.Recv(t, reply, "a snapshot with both steers")
	if len(snap.steers) != 2 {
		t.Fatalf("snapshot carried %d steers, want 2", len(snap.steers))
	}
	got := map[uint64]bool{}
	for range 2 {
		a := testkit.Recv(t, answers, "an answer per steer")
		if !a.Admitted {
			t.Fatalf("steer %d refused: %s", a.SteerId, a.Reason)
		}
		got[a.SteerId] = true
	}
	if !got[1] || !got[2] {
		t.Fatalf("answers for %v, want steers 1 and 2", got)
	}
}

// TestR4_SteerStaysBlockedUntilTheChildTakesItsNextSnapshot: once the
// steer has reached the run, Steer has still not returned; it returns when
// the child's next snapshot carries it.
func TestR4_SteerStaysBlockedUntilTheChildTakesItsNextSnapshot(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	arrived := steersArriving(t)
	h := parkedRun(t, sys)
	defer h.Dispose(context.Background())
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("left")}) }()
	testkit.Recv(t, arrived, "the steer to reach the run")
	handled(t, h)
	select {
	case err := <-steered:
		t.Fatalf("Steer returned (%v) before the child took a snapshot", err)
	default:
	}
	reply := make(chan snapshot, 1)
	h.sys.Root.Send(h.pid.Load(), takeSnapshot{reply: reply})
	if snap := testkit.Recv(t, reply, "the next snapshot"); len(snap.steers) != 1 {
		t.Fatalf("next snapshot carried %d steers", len(snap.steers))
	}
	if err := testkit.Recv(t, steered, "Steer to return once admitted"); err != nil {
		t.Fatalf("admitted steer: %v", err)
	}
}

// TestK3_NoWireMessageCanSettleOrFeedARun sends a run every protobuf
// message a peer could send except the commands it may legitimately send
// (Steer, SteerWithdraw, Cancel, Dispose, Watch): the run neither settles nor
// changes. The messages its own child sends it are Go values a peer
// cannot produce.
func TestK3_NoWireMessageCanSettleOrFeedARun(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	watch(t, nil)
	h := parkedRun(t, sys)
	allowed := map[protoreflect.FullName]bool{}
	for _, m := range []interface{ ProtoReflect() protoreflect.Message }{&messages.Steer{}, &messages.SteerWithdraw{}, &messages.Cancel{}, &messages.Dispose{}, &messages.Watch{}} {
		allowed[m.ProtoReflect().Descriptor().FullName()] = true
	}
	sent := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if name := mt.Descriptor().FullName(); name.Parent() == "subactor.messages" && !allowed[name] {
			h.sys.Root.Send(h.pid.Load(), mt.New().Interface())
			sent++
		}
		return true
	})
	if sent < 5 {
		t.Fatalf("only %d wire messages sent", sent)
	}
	handled(t, h)
	if h.latches.isClosed(settled) {
		t.Fatalf("a wire message settled the run: %+v", h.result.Result)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.Wait(testkit.Ctx(t)); res.StopReason != subagent.Aborted {
		t.Fatalf("disposed run settled %v", res.StopReason)
	}
}

// TestR3_DisposeWaitsForABlockedRelease: the child's exit notice goes out
// only after its resources were released, so Dispose cannot return while
// a release blocks.
func TestR3_DisposeWaitsForABlockedRelease(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	exitSeen := make(chan struct{}, 1)
	watch(t, func(msg any) {
		if _, ok := msg.(*childExited); ok {
			exitSeen <- struct{}{}
		}
	})
	releasing, unblock := make(chan struct{}), make(chan struct{})
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: parkedBody(took), Release: func() {
		close(releasing)
		<-unblock
	}})
	testkit.Recv(t, took, "the first snapshot")
	disposed := make(chan error, 1)
	go func() { disposed <- h.Dispose(context.Background()) }()
	testkit.Recv(t, releasing, "the release to begin")
	handled(t, h.(*handle))
	select {
	case <-exitSeen:
		t.Fatal("the child's exit reached the run while its release was still blocked")
	case err := <-disposed:
		t.Fatalf("Dispose returned (%v) while the release was blocked", err)
	default:
	}
	close(unblock)
	if err := testkit.Recv(t, disposed, "Dispose after the release"); err != nil {
		t.Fatal(err)
	}
}

// TestR2E1_EveryObserverHasRunWhenWaitReturns: the run settles for Wait
// only after the observers registered before it (the Service's, which
// tells the parent actor) have run.
func TestR2E1_EveryObserverHasRunWhenWaitReturns(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	h := parkedRun(t, sys)
	settledEarly := make(chan bool, 2)
	for range 2 {
		h.OnSettled(func(subagent.Result, error) { settledEarly <- h.latches.isClosed(settled) })
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if testkit.Recv(t, settledEarly, "an observer") {
			t.Fatal("Wait could return before an observer registered earlier had run")
		}
	}
}

// TestA2_AContinuableRunRelaunchesWithinItsBudget: a child that panics is
// relaunched from its checkpoint (the relaunch body) while the budget
// lasts, and the run settles with the relaunched child's answer; a run
// actor crash relaunches it too; past the budget the run settles error.
func TestA2_AContinuableRunRelaunchesWithinItsBudget(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	var launches atomic.Int32
	relaunch := func(ctx context.Context, g Gate) (subagent.Result, error) {
		if launches.Add(1) < 3 {
			panic("child bug")
		}
		return subagent.Result{Output: []subagent.ContentBlock{subagent.Text("recovered")}, StopReason: subagent.Completed}, nil
	}
	h := Start(sys, Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: func(context.Context, Gate) (subagent.Result, error) {
		panic("first bug")
	}, Relaunch: relaunch, Restarts: subagent.RestartPolicy{Max: 3, Window: time.Hour}})
	res, err := h.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "recovered" || launches.Load() != 3 {
		t.Fatalf("relaunched run settled %+v, %v after %d relaunches", res, err, launches.Load())
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}

	// Past the budget: the third crash within the window settles error.
	var crashes atomic.Int32
	always := func(context.Context, Gate) (subagent.Result, error) { crashes.Add(1); panic("always") }
	h = Start(sys, Spec{Ctx: context.Background(), Body: always, Relaunch: always, Restarts: subagent.RestartPolicy{Max: 2, Window: time.Hour}})
	res, _ = h.Wait(testkit.Ctx(t))
	var crash *CrashError
	if res.StopReason != subagent.Error || !errors.As(res.Cause, &crash) || crashes.Load() != 3 {
		t.Fatalf("run past its budget settled %+v after %d launches", res, crashes.Load())
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestA2_ARunActorCrashRelaunchesTheChild: a real panic in the run actor's
// Receive stops the child and relaunches it from its checkpoint; the
// relaunched child's answer settles the run.
func TestA2_ARunActorCrashRelaunchesTheChild(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	watch(t, func(msg any) {
		if _, ok := msg.(*messages.Cancel); ok {
			panic("injected")
		}
	})
	took := make(chan struct{}, 4)
	relaunched := func(ctx context.Context, g Gate) (subagent.Result, error) {
		return subagent.Result{Output: []subagent.ContentBlock{subagent.Text("again")}, StopReason: subagent.Completed}, nil
	}
	h := Start(sys, Spec{Ctx: context.Background(), Body: parkedBody(took), Relaunch: relaunched, Restarts: subagent.RestartPolicy{Max: 1, Window: time.Hour}})
	testkit.Recv(t, took, "the first snapshot")
	h.(*handle).sys.Root.Send(h.(*handle).pid.Load(), &messages.Cancel{Reason: "crash the actor"})
	res, err := h.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "again" {
		t.Fatalf("run after an actor crash settled %+v, %v", res, err)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestK1_AWatcherIsToldOfTheSettleAndQuiescenceOverTheWireProtocol: a
// watcher actor that disposes the run hears RunSettled and RunQuiesced as
// protobuf messages, as a remote caller or a router would: each once
// (TestA3_LifecycleSupervisionWatchAndAckProperties counts them).
func TestK1_AWatcherIsToldOfTheSettleAndQuiescenceOverTheWireProtocol(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	h := parkedRun(t, sys)
	heard := make(chan any, 8)
	root := sys.ActorSystem().Root
	watcher := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case string:
			if m == "watch" {
				c.Request(h.pid.Load(), &messages.Watch{})
			} else {
				c.Request(h.pid.Load(), &messages.Dispose{})
			}
		case *messages.RunSettled, *messages.RunQuiesced:
			heard <- m
		}
	}))
	defer root.Stop(watcher)
	root.Send(watcher, "watch")
	root.Send(watcher, "dispose")
	settled, ok := testkit.Recv(t, heard, "RunSettled").(*messages.RunSettled)
	if !ok || settled.RunId != "r" || settled.Result.GetStopReason() != string(subagent.Aborted) {
		t.Fatalf("first message %+v, want RunSettled aborted", settled)
	}
	if q, ok := testkit.Recv(t, heard, "RunQuiesced").(*messages.RunQuiesced); !ok || q.RunId != "r" {
		t.Fatalf("got %+v, want RunQuiesced", q)
	}
	testkit.Recv(t, h.latches.wait(quiesced), "the local handle to see quiescence too")
}
