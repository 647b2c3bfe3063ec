package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract S4: a provider that returns neither a run nor an error gets a
// typed error, and the caller no crash; likewise a typed nil run.
func TestS4_ANilRunFromAProviderIsATypedError(t *testing.T) {
	f := newFixture(t)
	for name, r := range map[string]subagent.Run{"nil": nil, "typed nil": (run.Run)(nil)} {
		p := &testProvider{name: name, sys: f.sys}
		p.start = func(context.Context, subagent.Scope, subagent.StartRequest) (subagent.Run, error) { return r, nil }
		release, err := f.svc.RegisterProvider(p)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		got, err := f.svc.Start(testkit.Ctx(t), name, request("x"))
		if got != nil || !errors.Is(err, subagent.ErrProviderFault) || !strings.Contains(err.Error(), fmt.Sprintf("provider %q: returned neither", name)) {
			t.Fatalf("%s run: %v, %v", name, got, err)
		}
	}
}

// Contract S5: a deadline that ends a live child keeps
// context.DeadlineExceeded visible in the result's cause.
func TestS5_ADeadlineStaysVisibleInTheResult(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "p", allCaps()) // never released: only the deadline ends it
	// The deadline must pass after Start returned: on a loaded machine a
	// short one can pass during Start, so a start it ended is tried again
	// with twice the time (K3: no window a slow machine misses).
	var r subagent.Run
	for window := 50 * time.Millisecond; ; window *= 2 {
		ctx, cancel := context.WithTimeout(context.Background(), window)
		defer cancel()
		var err error
		r, err = f.svc.Start(ctx, "p", request("x"))
		if err == nil {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) || window > testkit.Deadline {
			t.Fatal(err)
		}
	}
	defer r.Dispose(testkit.Ctx(t))
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted || !errors.Is(res.Cause, context.DeadlineExceeded) {
		t.Fatalf("run past its deadline settled %+v (cause %v), %v", res, res.Cause, err)
	}
}

// Contract A1: a caller's settle observer runs on a goroutine of its own,
// so one that blocks neither stalls the run nor captures a seam actor.
func TestA1_ACallersBlockingObserverDoesNotStallTheRun(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	r, err := f.svc.Start(testkit.Ctx(t), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	unblock, observed := make(chan struct{}), make(chan struct{})
	r.OnSettled(func(subagent.Result, error) { close(observed); <-unblock })
	defer close(unblock)
	close(p.release)
	testkit.Recv(t, observed, "the observer")
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatalf("Dispose while a caller's observer blocks: %v", err)
	}
}

// Contracts S1, R3: every run's start context is tied to its Service, so
// closing the Service cancels every live run: it settles aborted with
// ErrServiceClosed, and Dispose returns once the child has returned.
func TestS1R3_ClosingTheServiceCancelsItsRuns(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "p", allCaps()) // never released: the child waits for its cancel
	r, err := f.svc.Start(testkit.Ctx(t), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Close()
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted || !errors.Is(res.Cause, subagent.ErrServiceClosed) {
		t.Fatalf("a run whose Service closed settled %+v, %v", res, err)
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Contract A2: the embedder's restart policy reaches every run through its
// scope: a continuable child that crashes is relaunched within it.
func TestA2_TheEmbeddersRestartPolicyReachesTheRuns(t *testing.T) {
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithRunRestarts(subagent.RestartPolicy{Max: 1, Window: time.Hour}))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	p := &testProvider{name: "durable", sys: sys}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		h := run.Start(sys, run.Spec{Scope: scope, Ctx: ctx,
			Body: func(context.Context, run.Gate) (subagent.Result, error) { panic("crash") },
			Relaunch: func(context.Context, run.Gate) (subagent.Result, error) {
				return subagent.Result{Output: []subagent.ContentBlock{subagent.Text("resumed")}, StopReason: subagent.Completed}, nil
			},
		})
		return h, nil
	}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	r, err := f.svc.Start(testkit.Ctx(t), "durable", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Dispose(testkit.Ctx(t))
	if res, err := r.Wait(testkit.Ctx(t)); err != nil || subagent.TextOf(res.Output) != "resumed" {
		t.Fatalf("crashed continuable run settled %+v, %v", res, err)
	}
}

// Contract D3: a continuation whose descriptor is malformed, or of a
// version this build does not know, fails before any provider dispatch.
func TestD3_ABadDescriptorFailsBeforeTheProvider(t *testing.T) {
	f := newFixture(t)
	p := &resumer{testProvider{name: "durable", sys: f.sys, local: true, release: make(chan struct{})}}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	for descriptor, want := range map[string]error{
		`{"version":1,"provider":"durable","extra":true}`: descriptor.ErrMalformed,
		`{"version":1,"provider":""}`:                     descriptor.ErrMalformed,
		`[1,2]`:                                           descriptor.ErrMalformed,
		`{"version":2,"provider":"durable","new":"key"}`:  subagent.ErrNotResumable,
	} {
		_, err := f.svc.Resume(testkit.Ctx(t), "durable", subagent.StartRequest{Parent: top,
			Continuation: &subagent.Continuation{SessionID: "child", Descriptor: json.RawMessage(descriptor)}})
		if !errors.Is(err, want) {
			t.Fatalf("descriptor %s: %v, want %v", descriptor, err, want)
		}
	}
	if n := p.starts.Load(); n != 0 {
		t.Fatalf("the provider ran %d times for bad descriptors", n)
	}
}
