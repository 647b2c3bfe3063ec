package providertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Harness is a provider under test and the requests that drive its
// children. Each subtest gets a fresh one; whatever it holds (an actor
// system, a Service, a cluster) its maker releases with t.Cleanup.
type Harness struct {
	// Provider is the provider under test.
	Provider subagent.Provider
	// Start starts a run of Provider, typically the Service's Start for
	// its name (the run then carries the Service's run id and scope);
	// nil calls Provider.Start directly, with the zero Scope.
	Start func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error)
	// Listen subscribes a listener to the run events of the children a
	// parent delegated through Start: typically the Service's
	// ListenParent. Nil skips the checks that listen.
	Listen func(parentSessionID string, l subagent.Listener, opts ...registry.ListenOption) subagent.Subscription
	// Quick makes a child that completes promptly on its own.
	Quick subagent.StartRequest
	// Waiting makes a child that runs until it is cancelled.
	Waiting subagent.StartRequest
	// Ignore are goroutines the leak checks ignore: ones the provider's
	// machinery may start on first use and keep (a connection's writer).
	Ignore []goleak.Option
}

// Run runs the conformance suite against the provider newHarness makes,
// one subtest per check, each with a harness of its own.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Provider == nil {
				t.Fatal("the harness has no provider")
			}
			if h.Start == nil {
				h.Start = direct(h.Provider)
			}
			c.run(t, &h)
		})
	}
}

var cases = []struct {
	name string
	run  func(*testing.T, *Harness)
}{
	{"R1_StartReturnsARunWithItsIDs", testIDs},
	{"R2_WaitSettlesOnceToAValidStopReason", testSettles},
	{"R3_DisposeIsIdempotentConcurrentAndQuiesces", testDispose},
	{"S5_CancelledStartContextSettlesTheRunAborted", testCancelled},
	{"R2_WaitWithAnEndedContextReturnsItsError", testWaitEnded},
	{"R4_SteerIsAdmittedOrRefusedTyped", testSteer},
	{"R6_StartUnderAnEndedContextLeaksNothing", testStartEnded},
	{"E1_EventsEmittedThroughTheScopeReachAListenerInOrder", testEvents},
}

// direct starts a run of p as a caller other than the Service does: with
// the zero Scope.
func direct(p subagent.Provider) func(context.Context, subagent.StartRequest) (subagent.Run, error) {
	return func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
		return p.Start(ctx, subagent.Scope{}, req)
	}
}

// start starts req and disposes the run when the test ends.
func start(t *testing.T, h *Harness, ctx context.Context, req subagent.StartRequest) subagent.Run {
	t.Helper()
	r, err := h.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r == nil {
		t.Fatal("Start returned neither a run nor an error")
	}
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	return r
}

func wait(t *testing.T, r subagent.Run) subagent.Result {
	t.Helper()
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

func dispose(t *testing.T, r subagent.Run) {
	t.Helper()
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatalf("Dispose: %v", err)
	}
}

// valid are the stop reasons of the contract (providers may add more,
// never an empty one).
func valid(s subagent.StopReason) bool {
	switch s {
	case subagent.Completed, subagent.Aborted, subagent.Error, subagent.MaxTokens, subagent.Refusal:
		return true
	}
	return s != ""
}

// R1: a started run has the run id; a local run's session is its local
// agent's, a remote one has no local agent.
func testIDs(t *testing.T, h *Harness) {
	r := start(t, h, testkit.Ctx(t), h.Quick)
	if r.ID() == "" {
		t.Fatal("the run has no id")
	}
	if a := r.LocalAgent(); a != nil {
		if r.SessionID() == "" || a.SessionID() != r.SessionID() {
			t.Fatalf("local run: session %q, its agent's %q", r.SessionID(), a.SessionID())
		}
	}
	wait(t, r)
	dispose(t, r)
}

// R2: the result settles exactly once: every Wait and OnSettled sees the
// same valid stop reason.
func testSettles(t *testing.T, h *Harness) {
	r := start(t, h, testkit.Ctx(t), h.Quick)
	res := wait(t, r)
	if res.StopReason != subagent.Completed {
		t.Fatalf("the quick child settled %q (%s), want completed", res.StopReason, res.Detail)
	}
	again := wait(t, r)
	if again.StopReason != res.StopReason || subagent.TextOf(again.Output) != subagent.TextOf(res.Output) {
		t.Fatalf("second Wait %+v, first %+v", again, res)
	}
	got := make(chan subagent.Result, 1)
	r.OnSettled(func(res subagent.Result, err error) {
		if err != nil {
			t.Errorf("OnSettled: %v", err)
		}
		got <- res
	})
	if on := testkit.Recv(t, got, "OnSettled after the run settled"); on.StopReason != res.StopReason {
		t.Fatalf("OnSettled %+v, Wait %+v", on, res)
	}
	dispose(t, r)
	if after := wait(t, r); after.StopReason != res.StopReason {
		t.Fatalf("Wait after Dispose %+v, before %+v", after, res)
	}
}

// R3: Dispose of a live run, from several goroutines and again after,
// returns nil once the child quiesced: the run has settled, not
// completed, and no goroutine the run started is left.
func testDispose(t *testing.T, h *Harness) {
	before := goleak.IgnoreCurrent()
	r := start(t, h, testkit.Ctx(t), h.Waiting)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := r.Dispose(testkit.Ctx(t)); err != nil {
				t.Errorf("concurrent Dispose: %v", err)
			}
		})
	}
	wg.Wait()
	dispose(t, r)
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), testkit.Scale(time.Second))
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait after Dispose: %v (a disposed run has settled)", err)
	}
	if !valid(res.StopReason) || res.StopReason == subagent.Completed {
		t.Fatalf("a disposed waiting child settled %q", res.StopReason)
	}
	goleak.VerifyNone(t, append([]goleak.Option{before, testkit.DeadLetters}, h.Ignore...)...)
}

// S5: when the context a run was started with ends, the live child is
// cancelled and the run settles aborted, its cause the context's.
func testCancelled(t *testing.T, h *Harness) {
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := start(t, h, ctx, h.Waiting)
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.Aborted {
		t.Fatalf("a cancelled run settled %q (%s), want aborted", res.StopReason, res.Detail)
	}
	dispose(t, r)
}

// Wait's contract: once its ctx has ended Wait returns ctx's error,
// whether the run has settled or not.
func testWaitEnded(t *testing.T, h *Harness) {
	ended, cancel := context.WithCancel(testkit.Ctx(t))
	cancel()
	live := start(t, h, testkit.Ctx(t), h.Waiting)
	if _, err := live.Wait(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a live run with an ended ctx: %v, want context.Canceled", err)
	}
	short, stop := context.WithTimeout(testkit.Ctx(t), 50*time.Millisecond)
	defer stop()
	if _, err := live.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a live run past a deadline: %v, want context.DeadlineExceeded", err)
	}
	dispose(t, live)
	done := start(t, h, testkit.Ctx(t), h.Quick)
	wait(t, done)
	if _, err := done.Wait(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a settled run with an ended ctx: %v, want context.Canceled", err)
	}
	dispose(t, done)
}

// R4: a run that is a Steerer admits a steer to its live child (nil) or
// refuses it typed, and answers a steer it cannot admit (its child has
// ended, the run was disposed) with ErrNotDelivered. A run that is no
// Steerer cannot be steered at all: steering is an optional interface
// (the subagent package), not a method that fails.
func testSteer(t *testing.T, h *Harness) {
	r := start(t, h, testkit.Ctx(t), h.Quick)
	st, ok := r.(subagent.Steerer)
	if !ok {
		t.Skipf("%s's runs are no subagent.Steerer: nothing to steer", h.Provider.Name())
	}
	live := start(t, h, testkit.Ctx(t), h.Waiting)
	// A live child admits the steer or refuses it typed; a steer whose ctx
	// ends first (a child that asks its model nothing more until it is
	// cancelled never admits one) returns that ctx's error.
	short, stop := context.WithTimeout(testkit.Ctx(t), testkit.Scale(200*time.Millisecond))
	defer stop()
	err := live.(subagent.Steerer).Steer(short, []subagent.ContentBlock{subagent.Text("go on")})
	if err != nil && !errors.Is(err, subagent.ErrNotDelivered) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Steer of a live child: %v, want nil, ErrNotDelivered or the deadline", err)
	}
	t.Logf("Steer of a live child: %v", err)
	dispose(t, live)
	wait(t, r)
	msg := []subagent.ContentBlock{subagent.Text("too late")}
	if err := st.Steer(testkit.Ctx(t), msg); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("Steer after the child ended: %v, want ErrNotDelivered", err)
	}
	dispose(t, r)
	if err := st.Steer(testkit.Ctx(t), msg); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("Steer after Dispose: %v, want ErrNotDelivered", err)
	}
}

// S5, R6: a Start whose ctx has already ended either fails with the
// context's cancellation (and has rolled back everything) or returns a run
// that settles not completed; either way, once disposed, no goroutine of
// it remains. Checked through the harness's Start (the Service refuses
// before any provider code runs) and through the provider's own Start,
// which must roll back what it began.
func testStartEnded(t *testing.T, h *Harness) {
	for _, c := range []struct {
		name  string
		start func(context.Context, subagent.StartRequest) (subagent.Run, error)
	}{{"harness", h.Start}, {"provider", direct(h.Provider)}} {
		t.Run(c.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(testkit.Ctx(t))
			cancel()
			r, err := c.start(ctx, h.Waiting)
			switch {
			case err != nil:
				if r != nil {
					t.Fatalf("Start failed (%v) and returned a run", err)
				}
				if !errors.Is(err, context.Canceled) && !errors.Is(err, subagent.ErrCancelled) {
					t.Fatalf("Start under an ended ctx: %v, want its cancellation", err)
				}
			case r == nil:
				t.Fatal("Start returned neither a run nor an error")
			default:
				res := wait(t, r)
				if res.StopReason == subagent.Completed || !valid(res.StopReason) {
					t.Fatalf("a run started under an ended ctx settled %q", res.StopReason)
				}
				dispose(t, r)
			}
			goleak.VerifyNone(t, append([]goleak.Option{before, testkit.DeadLetters}, h.Ignore...)...)
		})
	}
}

// E1, E6: the progress a provider emits through its run's scope reaches
// a listener of the delegating parent, in order: the run's start first,
// then its progress (its model calls in order), then its end, every event
// carrying the run's id.
func testEvents(t *testing.T, h *Harness) {
	if h.Listen == nil {
		t.Skip("the harness has no Listen")
	}
	events := make(chan subagent.Event, 1024)
	sub := h.Listen(h.Quick.Parent.SessionID(), func(ev subagent.Event) error {
		events <- ev
		return nil
	})
	defer sub.Release()
	r := start(t, h, testkit.Ctx(t), h.Quick)
	wait(t, r)
	var got []subagent.Event
	for {
		ev := testkit.Recv(t, events, "the run's events up to its end")
		got = append(got, ev)
		if end, ok := ev.(subagent.RunEnded); ok && end.RunID == r.ID() {
			break
		}
	}
	if start, ok := got[0].(subagent.RunStarted); !ok || start.RunID != r.ID() {
		t.Fatalf("the first event is %#v, want the run's start", got[0])
	}
	progress, step := 0, 0
	for _, ev := range got[1 : len(got)-1] {
		p, ok := ev.(subagent.RunProgress)
		if !ok || p.RunID != r.ID() {
			t.Fatalf("between the run's start and end: %#v, want its progress (run %s)", ev, r.ID())
		}
		if p.Step < step {
			t.Fatalf("progress of step %d after step %d: %#v", p.Step, step, got)
		}
		progress, step = progress+1, p.Step
	}
	if progress == 0 {
		t.Fatalf("no progress of the quick child reached the listener: %#v", got)
	}
	dispose(t, r)
}
