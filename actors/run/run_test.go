package run_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/internal/leaktest"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.DeadLetters) }

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

func (p *parked) body(ctx context.Context, g *run.Gate) (subagent.Result, error) {
	steers, err := g.Take(ctx)
	if err != nil {
		return subagent.Stopped(subagent.Aborted, err.Error()), nil
	}
	p.took <- steers
	select {
	case <-p.release:
	case <-ctx.Done():
		return subagent.Stopped(subagent.Aborted, "cancelled"), nil
	}
	for {
		steers, err := g.Take(ctx)
		if err != nil {
			return subagent.Stopped(subagent.Aborted, err.Error()), nil
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
	h := run.Start(sys, run.Spec{ID: "r1", Ctx: context.Background(), Body: func(context.Context, *run.Gate) (subagent.Result, error) {
		return want, nil
	}})
	defer h.Dispose(context.Background())
	var calls atomic.Int32
	got := make(chan subagent.Result, 2)
	for range 2 {
		h.OnSettled(func(r subagent.Result, err error) { calls.Add(1); got <- r })
	}
	for range 2 {
		r, err := h.Wait(context.Background())
		if err != nil || subagent.TextOf(r.Output) != "done" || r.StopReason != subagent.Completed {
			t.Fatalf("Wait = %+v, %v", r, err)
		}
	}
	for range 2 {
		if r := <-got; subagent.TextOf(r.Output) != "done" {
			t.Fatalf("observer got %+v", r)
		}
	}
	if err := h.Dispose(context.Background()); err != nil {
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
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: p.body})
	defer h.Dispose(context.Background())
	if first := <-p.took; len(first) != 0 {
		t.Fatalf("first snapshot should be empty: %v", first)
	}
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(context.Background(), text("look left")) }()
	// The child is parked between requests: the steer can be admitted only
	// into a snapshot it asks for after release.
	close(p.release)
	second := <-p.took
	if err := <-steered; err != nil {
		t.Fatalf("Steer: %v", err)
	}
	if len(second) != 1 || subagent.TextOf(second[0]) != "look left" {
		t.Fatalf("next request did not carry the steer: %v", second)
	}
	res, _ := h.Wait(context.Background())
	if subagent.TextOf(res.Output) != "look left" {
		t.Fatalf("result %q", subagent.TextOf(res.Output))
	}
}

// Contract R4.
func TestR4_SteerRefusedAfterSettleIsNotQueued(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: func(context.Context, *run.Gate) (subagent.Result, error) {
		return subagent.Stopped(subagent.Completed, ""), nil
	}})
	defer h.Dispose(context.Background())
	h.Wait(context.Background())
	if err := h.Steer(context.Background(), text("late")); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer after settle: %v", err)
	}
	if err := h.Steer(context.Background(), nil); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Fatalf("empty steer: %v", err)
	}
}

// Contract R4.
func TestR4_SteerWithdrawnWhenItsContextEnds(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: p.body})
	defer h.Dispose(context.Background())
	<-p.took
	ctx, cancel := context.WithCancel(context.Background())
	steered := make(chan error, 1)
	go func() { steered <- h.Steer(ctx, text("never mind")) }()
	cancel()
	if err := <-steered; !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn steer: %v", err)
	}
	close(p.release)
	if err := h.Steer(context.Background(), text("this one")); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	if next := <-p.took; len(next) != 1 || subagent.TextOf(next[0]) != "this one" {
		t.Fatalf("withdrawn steer reached the model: %v", next)
	}
}

// Contract S5.
func TestS5_StartContextEndingCancelsTheLiveChild(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	ctx, cancel := context.WithCancel(context.Background())
	h := run.Start(sys, run.Spec{ID: "r", Ctx: ctx, Body: p.body})
	defer h.Dispose(context.Background())
	<-p.took
	cancel()
	res, err := h.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("cancelled run settled %+v, %v", res, err)
	}
	if err := h.Steer(context.Background(), text("x")); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer into a cancelled run: %v", err)
	}
}

// Contract R3.
func TestR3_DisposeIsIdempotentConcurrentAndQuiescent(t *testing.T) {
	sys := newSystem(t)
	actorsBefore := sys.LiveActors()
	goroutinesBefore := goleak.IgnoreCurrent()
	p := newParked()
	var released atomic.Bool
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: p.body, Release: func() { released.Store(true) }})
	<-p.took
	// The run actor and the reply address its child asks from.
	if sys.LiveActors() != actorsBefore+2 {
		t.Fatalf("run not counted: %d vs %d", sys.LiveActors(), actorsBefore)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() { errs <- h.Dispose(context.Background()) })
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
	if n := sys.LiveActors(); n != actorsBefore {
		t.Fatalf("live actors after dispose: %d, before: %d", n, actorsBefore)
	}
	if err := goleak.Find(goroutinesBefore, leaktest.DeadLetters); err != nil {
		t.Fatalf("goroutines left after dispose: %v", err)
	}
	res, _ := h.Wait(context.Background())
	if res.StopReason != subagent.Aborted {
		t.Fatalf("disposed live child settled %v", res.StopReason)
	}
	if err := h.Dispose(context.Background()); err != nil {
		t.Fatalf("Dispose after dispose: %v", err)
	}
}

// Contract A2.
func TestA2_PanicInChildSettlesWithError(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: func(context.Context, *run.Gate) (subagent.Result, error) {
		panic("model exploded")
	}})
	res, err := h.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Error || !strings.Contains(res.Detail, "model exploded") {
		t.Fatalf("panicking child settled %+v, %v", res, err)
	}
	if err := h.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Contract R2.
func TestR2_InfrastructureErrorSettlesAsError(t *testing.T) {
	sys := newSystem(t)
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: func(context.Context, *run.Gate) (subagent.Result, error) {
		return subagent.Result{}, errors.New("checkpoint failed")
	}})
	defer h.Dispose(context.Background())
	if _, err := h.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "checkpoint failed") {
		t.Fatalf("Wait error = %v", err)
	}
}

// Contract A2.
func TestA2_PanickingObserverNeitherCrashesTheRunNorStrandsWaiters(t *testing.T) {
	sys := newSystem(t)
	p := newParked()
	h := run.Start(sys, run.Spec{ID: "r", Ctx: context.Background(), Body: p.body})
	defer h.Dispose(context.Background())
	h.OnSettled(func(subagent.Result, error) { panic("observer bug") })
	got := make(chan subagent.StopReason, 1)
	h.OnSettled(func(r subagent.Result, _ error) { got <- r.StopReason })
	<-p.took
	close(p.release)
	if err := h.Steer(context.Background(), text("finish")); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(context.Background()); err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if r := <-got; r != subagent.Completed {
		t.Fatalf("second observer got %v", r)
	}
}
