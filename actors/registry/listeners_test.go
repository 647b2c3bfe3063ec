package registry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contracts E3, E5: a panicking, an erroring and a blocked listener beside
// a healthy one. The runs are unchanged, the healthy listener gets every
// event in order, and the blocked one, past its bound, is detached with an
// overflow notice after exactly the events it was allowed to hold.
func TestE3E5_FailingAndBlockedListenersNeitherStarvePeersNorChangeTheRun(t *testing.T) {
	logs := &testkit.Buffer{}
	f := newFixture(t, actors.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	p := f.provider(t, "p", allCaps())
	close(p.release)
	defer f.svc.ListenParent(top.SessionID(), func(subagent.Event) error {
		panic("listener bug")
	}).Release()
	defer f.svc.ListenParent(top.SessionID(), func(subagent.Event) error {
		return errors.New("listener refused")
	}).Release()
	const bound = 64
	unblock := make(chan struct{})
	blocked := make(chan subagent.Event, 2*bound)
	defer f.svc.ListenParent(top.SessionID(), func(ev subagent.Event) error {
		blocked <- ev
		<-unblock
		return nil
	}, registry.ListenBound(bound)).Release()
	healthy := make(recorder, 4096)
	defer f.svc.ListenParent(top.SessionID(), healthy.listen, registry.ListenBound(1<<20)).Release()

	const runs = 600 // far more events than the blocked listener may hold
	for i := range runs {
		r, err := f.svc.Start(context.Background(), "p", request(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Wait(testkit.Ctx(t))
		if err != nil || res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != fmt.Sprint(i) {
			t.Fatalf("run %d changed by listeners: %+v, %v", i, res, err)
		}
		r.Dispose(testkit.Ctx(t))
	}
	for i := range runs {
		start := healthy.next(t).(subagent.RunStarted)
		end := healthy.next(t).(subagent.RunEnded)
		if start.RunID != end.RunID || end.LastAssistantMessage != fmt.Sprint(i) {
			t.Fatalf("healthy listener out of order at %d: %#v %#v", i, start, end)
		}
	}
	close(unblock)
	for i := range bound {
		if ev := testkit.Recv(t, blocked, "the blocked listener's queued events"); subagent.TypeOf(ev) == subagent.TypeOf(subagent.ListenerOverflow{}) {
			t.Fatalf("overflow after %d events, want %d", i, bound)
		}
	}
	if ev := testkit.Recv(t, blocked, "the overflow notice"); ev != (subagent.ListenerOverflow{Bound: bound}) {
		t.Fatalf("event after the bound: %#v, want the overflow notice", ev)
	}
	out := logs.String()
	for _, want := range []string{"listener panicked", "listener bug", "listener failed", "listener refused", "detached"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// Contract E5: a burst of 2,000 concurrent runs. A listener that keeps up
// receives all 4,000 events, each run's start before its end; a blocked
// listener beside it is detached with the overflow notice after at most
// its bound, so what it costs stays bounded.
func TestE5_ABurstLosesNothingForAListenerThatKeepsUp(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	const runs, bound = 2000, 100
	var mu sync.Mutex
	started, ended := map[string]bool{}, map[string]bool{}
	var disorder atomic.Int32
	counting := f.svc.ListenParent(top.SessionID(), func(ev subagent.Event) error {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case subagent.RunStarted:
			started[ev.RunID] = true
		case subagent.RunEnded:
			if !started[ev.RunID] || ended[ev.RunID] {
				disorder.Add(1)
			}
			ended[ev.RunID] = true
		}
		return nil
	})
	defer counting.Release()
	unblock := make(chan struct{})
	var blockedCalls atomic.Int32
	overflowed := make(chan subagent.Event, 1)
	blocked := f.svc.ListenParent(top.SessionID(), func(ev subagent.Event) error {
		if o, ok := ev.(subagent.ListenerOverflow); ok {
			overflowed <- o
			return nil
		}
		blockedCalls.Add(1)
		<-unblock
		return nil
	}, registry.ListenBound(bound))
	defer blocked.Release()

	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			r, err := f.svc.Start(context.Background(), "p", request(fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
				return
			}
			r.Wait(testkit.Ctx(t))
			r.Dispose(testkit.Ctx(t))
		})
	}
	wg.Wait()
	if err := counting.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(started) != runs || len(ended) != runs || disorder.Load() != 0 {
		t.Fatalf("listener that keeps up saw %d starts, %d ends, %d out of order; want %d each", len(started), len(ended), disorder.Load(), runs)
	}
	mu.Unlock()
	close(unblock)
	if ev := testkit.Recv(t, overflowed, "the blocked listener's overflow notice"); ev != (subagent.ListenerOverflow{Bound: bound}) {
		t.Fatalf("notice %#v", ev)
	}
	if n := blockedCalls.Load(); n != bound {
		t.Fatalf("blocked listener was handed %d events, want its bound %d", n, bound)
	}
}

// Contracts S1, A1, E5: Close returns while a listener is blocked in its
// own code, and once that code returns nothing of the listener remains.
// Releasing from inside a listener does not deadlock.
func TestS1A1E5_CloseAndReleaseNeverWaitForAListener(t *testing.T) {
	goroutines := goleak.IgnoreCurrent()
	sys := actors.NewSystem()
	shutdown := sync.OnceFunc(sys.Shutdown)
	defer shutdown()
	svc := registry.New(sys)
	p := &testProvider{name: "p", sys: sys, local: true, release: make(chan struct{})}
	close(p.release)
	if _, err := svc.RegisterProvider(p); err != nil {
		t.Fatal(err)
	}
	inside, unblock := make(chan struct{}), make(chan struct{})
	svc.ListenParent(top.SessionID(), func(subagent.Event) error {
		close(inside)
		<-unblock
		return nil
	})
	var self subagent.Subscription
	releasedInside := make(chan struct{})
	var calls atomic.Int32
	self = svc.ListenParent(top.SessionID(), func(subagent.Event) error {
		if calls.Add(1) == 1 {
			self.Release() // from inside: must return
			close(releasedInside)
		}
		return nil
	})
	r, err := svc.Start(context.Background(), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(testkit.Ctx(t))
	r.Dispose(testkit.Ctx(t))
	testkit.Recv(t, inside, "the blocked listener to be called")
	testkit.Recv(t, releasedInside, "a release from inside the listener to return")

	closed := make(chan struct{})
	go func() { svc.Close(); close(closed) }()
	testkit.Recv(t, closed, "Close while a listener is blocked")
	if n := calls.Load(); n != 1 {
		t.Fatalf("a listener released from inside was called %d times", n)
	}
	close(unblock)
	shutdown()
	if err := goleak.Find(goroutines, testkit.DeadLetters); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}

// Contract E3: Flush returns once the listener handled every event emitted
// before it; after Release no new call begins.
func TestE3_FlushWaitsForEverythingBeforeAndReleaseStopsDelivery(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	var handled atomic.Int32
	gate := make(chan struct{})
	sub := f.svc.ListenParent(top.SessionID(), func(subagent.Event) error {
		<-gate
		handled.Add(1)
		return nil
	})
	r, err := f.svc.Start(context.Background(), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(testkit.Ctx(t))
	r.Dispose(testkit.Ctx(t))
	flushed := make(chan error, 1)
	go func() { flushed <- sub.Flush(testkit.Ctx(t)) }()
	close(gate)
	if err := testkit.Recv(t, flushed, "Flush"); err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 2 {
		t.Fatalf("Flush returned after %d of 2 events", n)
	}
	sub.Release()
	sub.Release() // idempotent
	r2, _ := f.svc.Start(context.Background(), "p", request("y"))
	r2.Wait(testkit.Ctx(t))
	r2.Dispose(testkit.Ctx(t))
	// Another listener's flush proves the parent emitted the second run's
	// events; the released one got none of them.
	other := f.svc.ListenParent(top.SessionID(), func(subagent.Event) error { return nil })
	defer other.Release()
	if err := other.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 2 {
		t.Fatalf("listener called after release: %d", n)
	}
}

// Contract E6: a listener can ask for some event types only.
func TestE6_AListenerReceivesOnlyTheTypesItAsksFor(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	ends := make(recorder, 8)
	defer f.svc.ListenParent(top.SessionID(), ends.listen, registry.OnlyEvents(subagent.TypeOf(subagent.RunEnded{}))).Release()
	r, err := f.svc.Start(context.Background(), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(testkit.Ctx(t))
	r.Dispose(testkit.Ctx(t))
	if ev, ok := ends.next(t).(subagent.RunEnded); !ok || ev.RunID != r.ID() {
		t.Fatalf("first event delivered %#v, want the run's end", ev)
	}
}
