package run_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

func newSystem(t *testing.T) *actors.System {
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	return sys
}

func text(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

// parked is a body that takes one snapshot, reports it and waits for
// release; then it takes snapshots until one carries a steer (or the run
// closes), reports that one and returns the text of every steer it saw.
type parked struct {
	took    chan [][]subagent.ContentBlock
	release chan struct{}
}

func newParked() *parked {
	return &parked{took: make(chan [][]subagent.ContentBlock, 2), release: make(chan struct{})}
}

func (p *parked) body(ctx context.Context, g run.Gate) (subagent.Result, error) {
	steers, err := g.Take(ctx)
	if err != nil {
		return subagent.Result{StopReason: subagent.Aborted, Detail: err.Error()}, nil
	}
	p.took <- steers
	select {
	case <-p.release:
	case <-ctx.Done():
		return subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled"}, nil
	}
	for {
		steers, err := g.Take(ctx)
		if err != nil {
			return subagent.Result{StopReason: subagent.Aborted, Detail: err.Error()}, nil
		}
		if len(steers) > 0 {
			p.took <- steers
			return subagent.Result{Output: steers[0], StopReason: subagent.Completed}, nil
		}
	}
}

// Contract R2.
func TestR2_SettlesExactlyOnceToTheBodyResult(t *testing.T) {
	sys := newSystem(t)
	want := subagent.Result{Output: text("done"), StopReason: subagent.Completed}
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r1"}, Ctx: context.Background(), Body: func(context.Context, run.Gate) (subagent.Result, error) {
		return want, nil
	}})
	defer h.Dispose(testkit.Ctx(t))
	var calls atomic.Int32
	got := make(chan subagent.Result, 2)
	for range 2 {
		h.OnSettled(func(r subagent.Result, err error) { calls.Add(1); got <- r })
	}
	for range 2 {
		r, err := h.Wait(testkit.Ctx(t))
		if err != nil || subagent.TextOf(r.Output) != "done" || r.StopReason != subagent.Completed {
			t.Fatalf("Wait = %+v, %v", r, err)
		}
	}
	for range 2 {
		if r := testkit.Recv(t, got, "an observer"); subagent.TextOf(r.Output) != "done" {
			t.Fatalf("observer got %+v", r)
		}
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("observers called %d times", calls.Load())
	}
}

// Contract R4.
func TestR4_SteerReturnsOnlyOnceAdmittedIntoNextRequest(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: p.body})
	defer h.Dispose(testkit.Ctx(t))
	if first := testkit.Recv(t, p.took, "the first snapshot"); len(first) != 0 {
		t.Fatalf("first snapshot should be empty: %v", first)
	}
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(testkit.Ctx(t), text("look left")) }()
	// The child is parked between requests: the steer can be admitted only
	// into a snapshot it asks for after release.
	close(p.release)
	second := testkit.Recv(t, p.took, "the snapshot after release")
	if err := testkit.Recv(t, steered, "Steer to return"); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	if len(second) != 1 || subagent.TextOf(second[0]) != "look left" {
		t.Fatalf("next request did not carry the steer: %v", second)
	}
	res, _ := h.Wait(testkit.Ctx(t))
	if subagent.TextOf(res.Output) != "look left" {
		t.Fatalf("result %q", subagent.TextOf(res.Output))
	}
}

// Contract R4.
func TestR4_SteerRefusedAfterSettleIsNotQueued(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: func(context.Context, run.Gate) (subagent.Result, error) {
		return subagent.Result{StopReason: subagent.Completed}, nil
	}})
	defer h.Dispose(testkit.Ctx(t))
	h.Wait(testkit.Ctx(t))
	if err := h.Steer(testkit.Ctx(t), text("late")); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer after settle: %v", err)
	}
	if err := h.Steer(testkit.Ctx(t), nil); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Fatalf("empty steer: %v", err)
	}
}

// Contract R4.
func TestR4_SteerWithdrawnWhenItsContextEnds(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: p.body})
	defer h.Dispose(testkit.Ctx(t))
	testkit.Recv(t, p.took, "the first snapshot")
	ctx, cancel := context.WithCancel(context.Background())
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(ctx, text("never mind")) }()
	cancel()
	if err := testkit.Recv(t, steered, "the withdrawn Steer to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn steer: %v", err)
	}
	close(p.release)
	if err := h.Steer(testkit.Ctx(t), text("this one")); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	if next := testkit.Recv(t, p.took, "the next snapshot"); len(next) != 1 || subagent.TextOf(next[0]) != "this one" {
		t.Fatalf("withdrawn steer reached the model: %v", next)
	}
}

// Contract S5.
func TestS5_StartContextEndingCancelsTheLiveChild(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	ctx, cancel := context.WithCancel(context.Background())
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: ctx, Body: p.body})
	defer h.Dispose(testkit.Ctx(t))
	testkit.Recv(t, p.took, "the first snapshot")
	cancel()
	res, err := h.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("cancelled run settled %+v, %v", res, err)
	}
	if err := h.Steer(testkit.Ctx(t), text("x")); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer into a cancelled run: %v", err)
	}
}

// Contract R3.
func TestR3_DisposeIsIdempotentConcurrentAndQuiescent(t *testing.T) {
	sys := newSystem(t)
	actorsBefore := testkit.LiveActors(sys)
	goroutinesBefore := goleak.IgnoreCurrent()
	p := newParked()
	var released atomic.Bool
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: p.body, Release: func() { released.Store(true) }})
	testkit.Recv(t, p.took, "the first snapshot")
	// The run actor; its child asks on a channel, not a reply actor.
	if testkit.LiveActors(sys) != actorsBefore+1 {
		t.Fatalf("run not counted: %d vs %d", testkit.LiveActors(sys), actorsBefore)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() { errs <- h.Dispose(testkit.Ctx(t)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Dispose: %v", err)
		}
	}
	if !released.Load() {
		t.Fatal("Dispose returned before the child's resources were released")
	}
	if n := testkit.LiveActors(sys); n != actorsBefore {
		t.Fatalf("live actors after dispose: %d, before: %d", n, actorsBefore)
	}
	if err := goleak.Find(goroutinesBefore, testkit.DeadLetters); err != nil {
		t.Fatalf("goroutines left after dispose: %v", err)
	}
	res, _ := h.Wait(testkit.Ctx(t))
	if res.StopReason != subagent.Aborted {
		t.Fatalf("disposed live child settled %v", res.StopReason)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatalf("Dispose after dispose: %v", err)
	}
}

// Contract A2.
func TestA2_PanicInChildSettlesWithError(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: func(context.Context, run.Gate) (subagent.Result, error) {
		panic("model exploded")
	}})
	res, err := h.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Error || !strings.Contains(res.Detail, "model exploded") {
		t.Fatalf("panicking child settled %+v, %v", res, err)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Contract R2.
func TestR2_InfrastructureErrorSettlesAsError(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: func(context.Context, run.Gate) (subagent.Result, error) {
		return subagent.Result{}, errors.New("checkpoint failed")
	}})
	defer h.Dispose(testkit.Ctx(t))
	if _, err := h.Wait(testkit.Ctx(t)); err == nil || !strings.Contains(err.Error(), "checkpoint failed") {
		t.Fatalf("Wait error = %v", err)
	}
}

// Contract A2.
func TestA2_PanickingObserverNeitherCrashesTheRunNorStrandsWaiters(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: context.Background(), Body: p.body})
	defer h.Dispose(testkit.Ctx(t))
	h.OnSettled(func(subagent.Result, error) { panic("observer bug") })
	got := make(chan subagent.StopReason, 1)
	h.OnSettled(func(r subagent.Result, _ error) { got <- r.StopReason })
	testkit.Recv(t, p.took, "the first snapshot")
	close(p.release)
	if err := h.Steer(testkit.Ctx(t), text("finish")); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(testkit.Ctx(t)); err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if r := testkit.Recv(t, got, "the second observer"); r != subagent.Completed {
		t.Fatalf("second observer got %v", r)
	}
}

// BenchmarkRun is one activation of a run and nothing else: a body that
// takes one snapshot and returns, under a start context that can end, an
// observer, then Wait and Dispose.
func BenchmarkRun(b *testing.B) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := func(ctx context.Context, g run.Gate) (subagent.Result, error) {
		if _, err := g.Take(ctx); err != nil {
			return subagent.Result{}, err
		}
		return subagent.Result{StopReason: subagent.Completed}, nil
	}
	observer := func(subagent.Result, error) {}
	b.ReportAllocs()
	for b.Loop() {
		h := run.Start(sys, run.Spec{Scope: subagent.Scope{RunID: "r"}, Ctx: ctx, Body: body})
		h.OnSettled(observer)
		if _, err := h.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if err := h.Dispose(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestS5_R2_ABoundRunsChildRunsUnderTheStartContext: given the start
// context's cancel (Spec.Cancel, as the Service hands it over), a run
// that cannot relaunch runs its child under the start context itself. A
// child that finishes leaves it alone and settles completed (the run
// never takes its own end for the caller's cancel); Dispose of a live
// child cancels it, and the run settles aborted.
func TestS5_R2_ABoundRunsChildRunsUnderTheStartContext(t *testing.T) {
	sys := newSystem(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var childCtx context.Context
	h := run.Start(sys, run.Spec{Ctx: ctx, Cancel: cancel, Body: func(c context.Context, _ run.Gate) (subagent.Result, error) {
		childCtx = c
		return subagent.Result{Output: text("done"), StopReason: subagent.Completed}, nil
	}})
	res, err := h.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("bound run settled %+v, %v", res, err)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if childCtx != ctx || ctx.Err() != nil {
		t.Fatalf("child ran under %v (start context %v, ended: %v)", childCtx, ctx, ctx.Err())
	}

	ctx, cancel = context.WithCancelCause(context.Background())
	defer cancel(nil)
	p := newParked()
	h = run.Start(sys, run.Spec{Ctx: ctx, Cancel: cancel, Body: p.body})
	testkit.Recv(t, p.took, "the first snapshot")
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.Wait(testkit.Ctx(t)); res.StopReason != subagent.Aborted || ctx.Err() == nil {
		t.Fatalf("disposed bound run settled %+v; start context ended: %v", res, ctx.Err())
	}
}

// TestA2_ARelaunchableRunKeepsAContextPerChild: with a restart policy, a
// run given the start context's cancel still runs each child under a
// context of its own, since stopping a child for its relaunch must not
// end the start context the relaunched child runs under.
func TestA2_ARelaunchableRunKeepsAContextPerChild(t *testing.T) {
	sys := newSystem(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var launches atomic.Int32
	body := func(c context.Context, _ run.Gate) (subagent.Result, error) {
		if launches.Add(1) == 1 {
			panic("first bug")
		}
		if c == ctx || c.Err() != nil {
			return subagent.Result{StopReason: subagent.Error, Detail: "relaunched under the start context"}, nil
		}
		return subagent.Result{Output: text("recovered"), StopReason: subagent.Completed}, nil
	}
	h := run.Start(sys, run.Spec{Ctx: ctx, Cancel: cancel, Body: body, Relaunch: body, Restarts: subagent.RestartPolicy{Max: 1, Window: time.Hour}})
	defer h.Dispose(testkit.Ctx(t))
	if res, err := h.Wait(testkit.Ctx(t)); err != nil || res.StopReason != subagent.Completed || ctx.Err() != nil {
		t.Fatalf("relaunched run settled %+v, %v; start context ended: %v", res, err, ctx.Err())
	}
}
