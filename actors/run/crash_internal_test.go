package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/internal/await"
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
func handled(t *testing.T, h *Handle) {
	t.Helper()
	p := probe{seen: make(chan struct{})}
	h.sys.Root.Send(h.pid, p)
	await.Recv(t, p.seen, "the probe to pass the run's mailbox")
}

func parkedBody(took chan<- struct{}) Body {
	return func(ctx context.Context, g *Gate) (subagent.Result, error) {
		for {
			steers, err := g.Take(ctx)
			if err != nil {
				return subagent.Stopped(subagent.Aborted, err.Error()), nil
			}
			took <- struct{}{}
			if len(steers) > 0 {
				return subagent.Result{Output: steers[len(steers)-1], StopReason: subagent.Completed}, nil
			}
			<-ctx.Done()
			return subagent.Stopped(subagent.Aborted, "cancelled"), nil
		}
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
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took)})
	await.Recv(t, took, "the first snapshot")
	panicOn.Store("*messages.SteerWithdraw") // never sent: nothing crashes yet
	handled(t, h)
	panicOn.Store("*messages.Steer")
	err := h.Steer(await.Ctx(t), []subagent.ContentBlock{subagent.Text("x")})
	if !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("a steer whose handling crashed the run: %v", err)
	}
	res, werr := h.Wait(await.Ctx(t))
	var crash *CrashError
	if werr != nil || res.StopReason != subagent.Error || !errors.As(res.Cause, &crash) || !strings.Contains(res.Detail, "injected in *messages.Steer") {
		t.Fatalf("crashed run settled %+v, %v", res, werr)
	}
	panicOn.Store("*messages.Dispose")
	if err := h.Dispose(await.Ctx(t)); err != nil {
		t.Fatalf("Dispose whose handling panicked: %v", err)
	}
}

// TestR4_TwoSteersFromOneSenderAreBothAnswered: a router actor steering on
// behalf of many callers sends from one address; each steer is answered by
// its own id.
func TestR4_TwoSteersFromOneSenderAreBothAnswered(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	arrived := make(chan struct{}, 2)
	watch(t, func(msg any) {
		if _, ok := msg.(*messages.Steer); ok {
			arrived <- struct{}{}
		}
	})
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took)})
	defer h.Dispose(context.Background())
	await.Recv(t, took, "the first snapshot")
	answers := make(chan *messages.SteerAnswer, 2)
	root := sys.ActorSystem().Root
	router := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.Steer:
			c.Request(h.pid, m)
		case *messages.SteerAnswer:
			answers <- m
		}
	}))
	defer root.Stop(router)
	root.Send(router, &messages.Steer{SteerId: 1, Content: messages.FromContent([]subagent.ContentBlock{subagent.Text("one")})})
	root.Send(router, &messages.Steer{SteerId: 2, Content: messages.FromContent([]subagent.ContentBlock{subagent.Text("two")})})
	// The parked child asks again only once cancelled; a Take from here
	// admits both steers into one snapshot.
	await.Recv(t, arrived, "the first steer to reach the run")
	await.Recv(t, arrived, "the second steer to reach the run")
	reply := make(chan snapshot, 1)
	root.Send(h.pid, takeSnapshot{reply: reply})
	snap := await.Recv(t, reply, "a snapshot with both steers")
	if len(snap.steers) != 2 {
		t.Fatalf("snapshot carried %d steers, want 2", len(snap.steers))
	}
	got := map[uint64]bool{}
	for range 2 {
		a := await.Recv(t, answers, "an answer per steer")
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
	arrived := make(chan struct{}, 1)
	watch(t, func(msg any) {
		if _, ok := msg.(*messages.Steer); ok {
			arrived <- struct{}{}
		}
	})
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took)})
	defer h.Dispose(context.Background())
	await.Recv(t, took, "the first snapshot")
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(await.Ctx(t), []subagent.ContentBlock{subagent.Text("left")}) }()
	await.Recv(t, arrived, "the steer to reach the run")
	handled(t, h)
	select {
	case err := <-steered:
		t.Fatalf("Steer returned (%v) before the child took a snapshot", err)
	default:
	}
	reply := make(chan snapshot, 1)
	h.sys.Root.Send(h.pid, takeSnapshot{reply: reply})
	if snap := await.Recv(t, reply, "the next snapshot"); len(snap.steers) != 1 {
		t.Fatalf("next snapshot carried %d steers", len(snap.steers))
	}
	if err := await.Recv(t, steered, "Steer to return once admitted"); err != nil {
		t.Fatalf("admitted steer: %v", err)
	}
}

// TestK3_NoWireMessageCanSettleOrFeedARun sends a run every protobuf
// message a peer could send except the commands it may legitimately send
// (Steer, SteerWithdraw, Cancel, Dispose): the run neither settles nor
// changes. The messages its own child sends it are Go values a peer
// cannot produce.
func TestK3_NoWireMessageCanSettleOrFeedARun(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	arrived := make(chan struct{}, 2)
	watch(t, func(msg any) {
		if _, ok := msg.(*messages.Steer); ok {
			arrived <- struct{}{}
		}
	})
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took)})
	await.Recv(t, took, "the first snapshot")
	allowed := map[protoreflect.FullName]bool{}
	for _, m := range []interface{ ProtoReflect() protoreflect.Message }{&messages.Steer{}, &messages.SteerWithdraw{}, &messages.Cancel{}, &messages.Dispose{}} {
		allowed[m.ProtoReflect().Descriptor().FullName()] = true
	}
	sent := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if name := mt.Descriptor().FullName(); name.Parent() == "subactor.messages" && !allowed[name] {
			h.sys.Root.Send(h.pid, mt.New().Interface())
			sent++
		}
		return true
	})
	if sent < 5 {
		t.Fatalf("only %d wire messages sent", sent)
	}
	handled(t, h)
	if h.settled.Err() != nil {
		t.Fatalf("a wire message settled the run: %+v", h.result)
	}
	if err := h.Dispose(await.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.Wait(await.Ctx(t)); res.StopReason != subagent.Aborted {
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
		if _, ok := msg.(childExited); ok {
			exitSeen <- struct{}{}
		}
	})
	releasing, unblock := make(chan struct{}), make(chan struct{})
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took), Release: func() {
		close(releasing)
		<-unblock
	}})
	await.Recv(t, took, "the first snapshot")
	disposed := make(chan error, 1)
	go func() { disposed <- h.Dispose(context.Background()) }()
	await.Recv(t, releasing, "the release to begin")
	handled(t, h)
	select {
	case <-exitSeen:
		t.Fatal("the child's exit reached the run while its release was still blocked")
	case err := <-disposed:
		t.Fatalf("Dispose returned (%v) while the release was blocked", err)
	default:
	}
	close(unblock)
	if err := await.Recv(t, disposed, "Dispose after the release"); err != nil {
		t.Fatal(err)
	}
}

// TestR2E1_EveryObserverHasRunWhenWaitReturns: the run settles for Wait
// only after the observers registered before it (the Service's, which
// tells the parent actor) have run.
func TestR2E1_EveryObserverHasRunWhenWaitReturns(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	took := make(chan struct{}, 4)
	h := Start(sys, Spec{RunID: "r", Ctx: context.Background(), Body: parkedBody(took)})
	await.Recv(t, took, "the first snapshot")
	settledEarly := make(chan bool, 2)
	for range 2 {
		h.OnSettled(func(subagent.Result, error) { settledEarly <- h.settled.Err() != nil })
	}
	if err := h.Dispose(await.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if await.Recv(t, settledEarly, "an observer") {
			t.Fatal("Wait could return before an observer registered earlier had run")
		}
	}
}
