package spawn_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/subagent"
)

// mode is how a caller holds a run it started. A run keeps one contract
// whichever it is (issue 19): nothing in a run depends on when, where or
// whether it is waited on.
type mode struct {
	name string
	// call runs f as the mode's caller does: foreground on the goroutine
	// that started the run, at once (the delegate tool's foreground
	// delegation); background on a goroutine of its own (a task, a
	// caller that looks later).
	call func(t *testing.T, f func())
}

var modes = []mode{
	{"foreground", func(_ *testing.T, f func()) { f() }},
	{"background", func(t *testing.T, f func()) {
		done := make(chan struct{}, 1)
		go func() { defer func() { done <- struct{}{} }(); f() }()
		testkit.Recv(t, done, "the background caller")
	}},
}

// startIn starts a child of a fresh parent on a provider whose model is m.
func startIn(t *testing.T, m agent.Model, ctx context.Context) subagent.Run {
	t.Helper()
	e := newEnv(t)
	e.register(t, spawn.Config{Model: m})
	run, err := e.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Prompt: prompt("go"), Parent: e.parent(t, "p", 0, subagent.AgentOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Dispose(context.Background()) })
	return run
}

// Contract R2: Wait honours its ctx in every mode: it returns the
// context's error when ctx ends first, while the child goes on.
func TestR2_WaitHonoursItsContextInEveryMode(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			calls := make(chan struct{}, 1)
			run := startIn(t, blockingModel{calls}, t.Context())
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-calls; cancel() }()
			m.call(t, func() {
				if res, err := run.Wait(ctx); !errors.Is(err, context.Canceled) || res.StopReason != "" {
					t.Errorf("Wait under an ended context: %+v, %v; want the context's error", res, err)
				}
			})
			if err := run.Dispose(testkit.Ctx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Contract R4: a steer sent before anyone waits is admitted into the
// child's next model request in every mode.
func TestR4_SteerBeforeWaitIsAdmittedInEveryMode(t *testing.T) {
	fs := patientTools(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t)
			e.register(t, spawn.Config{Tools: fs, Model: patient{scripted.New()}, MaxSteps: math.MaxInt})
			run, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("echo done"), Parent: e.parent(t, "p", 0, subagent.AgentOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			m.call(t, func() {
				if err := run.(subagent.Steerer).Steer(testkit.Ctx(t), prompt("wrap up")); err != nil {
					t.Errorf("Steer before Wait: %v", err)
				}
				if res, err := run.Wait(testkit.Ctx(t)); err != nil || res.StopReason != subagent.Completed {
					t.Errorf("the steered child ended %+v, %v", res, err)
				}
			})
			if err := run.Dispose(testkit.Ctx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Contract S5: cancelling the start context reports the same in every
// mode: a Wait under that context returns its error, and the run settles
// aborted with the cancellation as its cause.
func TestS5_CancellationReportsTheSameInEveryMode(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			calls := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(t.Context())
			run := startIn(t, blockingModel{calls}, ctx)
			go func() { <-calls; cancel() }()
			m.call(t, func() {
				if res, err := run.Wait(ctx); !errors.Is(err, context.Canceled) || res.StopReason != "" {
					t.Errorf("Wait under the cancelled start context: %+v, %v; want the context's error", res, err)
				}
				res, err := run.Wait(testkit.Ctx(t))
				if err != nil || res.StopReason != subagent.Aborted || !errors.Is(res.Cause, context.Canceled) {
					t.Errorf("the cancelled run settled %+v, %v; want aborted by the cancellation", res, err)
				}
			})
		})
	}
}

// Contract R3: Dispose from elsewhere releases a caller blocked in Wait
// in every mode, with the run settled aborted.
func TestR3_DisposeReleasesABlockedWaitInEveryMode(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			calls := make(chan struct{}, 1)
			run := startIn(t, blockingModel{calls}, t.Context())
			disposed := make(chan error, 1)
			go func() { <-calls; disposed <- run.Dispose(testkit.Ctx(t)) }()
			m.call(t, func() {
				if res, err := run.Wait(testkit.Ctx(t)); err != nil || res.StopReason != subagent.Aborted {
					t.Errorf("Wait on a disposed run: %+v, %v; want aborted", res, err)
				}
			})
			if err := testkit.Recv(t, disposed, "Dispose"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// crashing is a model that ends its goroutine: with runtime.Goexit (what a
// test's t.FailNow does) or a panic.
type crashing struct{ goexit bool }

func (m crashing) Generate(context.Context, agent.Request) (agent.Response, error) {
	if m.goexit {
		runtime.Goexit()
	}
	panic("model exploded")
}

// Contract A2 (and R2): a child whose goroutine ends by runtime.Goexit
// settles its run with stop reason error, and its waiter goes on, in every
// mode.
func TestA2_GoexitInAChildSettlesErrorAndSparesItsWaiterInEveryMode(t *testing.T) {
	testCrash(t, crashing{goexit: true}, "runtime.Goexit")
}

// Contract A2 (and R2): a child that panics settles its run with stop
// reason error, and its waiter goes on, in every mode.
func TestA2_PanicInAChildSettlesErrorAndSparesItsWaiterInEveryMode(t *testing.T) {
	testCrash(t, crashing{}, "model exploded")
}

func testCrash(t *testing.T, model crashing, detail string) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			run := startIn(t, model, t.Context())
			returned := false
			m.call(t, func() {
				res, err := run.Wait(testkit.Ctx(t))
				if err != nil || res.StopReason != subagent.Error || !strings.Contains(res.Detail, detail) {
					t.Errorf("the crashed child settled %+v, %v; want error with %q", res, err, detail)
				}
				returned = true
			})
			if !returned {
				t.Fatal("the child's crash unwound its waiter")
			}
			if err := run.Dispose(testkit.Ctx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Contract R2: a run nobody waits on makes progress: an observer alone
// gets its result.
func TestR2_OnSettledAloneLetsARunSettle(t *testing.T) {
	run := startIn(t, scripted.New(), t.Context())
	got := make(chan subagent.Result, 1)
	run.OnSettled(func(res subagent.Result, _ error) { got <- res })
	if res := testkit.Recv(t, got, "the observer"); res.StopReason != subagent.Completed {
		t.Fatalf("the observed run settled %+v", res)
	}
}

// barrier is a model whose calls return only once n of them have begun.
type barrier struct {
	mu      sync.Mutex
	n       int
	entered chan struct{} // closed once n calls have begun
}

func (b *barrier) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.entered)
	}
	b.mu.Unlock()
	select {
	case <-b.entered:
		return final("met"), nil
	case <-ctx.Done():
		return agent.Response{}, context.Cause(ctx)
	}
}

// Contract R2: two children waited in turn on one goroutine both make
// progress while the first is waited on: neither waits for its waiter.
func TestR2_TwoChildrenWaitedInTurnBothProgress(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{Model: &barrier{n: 2, entered: make(chan struct{})}})
	parent := e.parent(t, "p", 0, subagent.AgentOptions{})
	var runs []subagent.Run
	for range 2 {
		run, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("go"), Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for i, run := range runs {
		if res := finish(t, run); res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "met" {
			t.Fatalf("child %d settled %+v", i, res)
		}
	}
}

// Contract E2 with R3: a child's published agent can be closed by whoever
// holds it. The child's loop runs under its run's own context (its Gate
// owns it), so Close cancels that context: the model call in progress
// ends, and the run settles aborted with the agent's ErrClosed as cause.
func TestE2_R3_ClosingAChildsAgentEndsItsRun(t *testing.T) {
	calls := make(chan struct{}, 1)
	run := startIn(t, blockingModel{calls}, t.Context())
	testkit.Recv(t, calls, "the child's model call")
	a, ok := run.LocalAgent().(*agent.Agent)
	if !ok {
		t.Fatalf("LocalAgent is %T, want *agent.Agent", run.LocalAgent())
	}
	a.Close()
	res, err := run.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted || !errors.Is(res.Cause, agent.ErrClosed) {
		t.Fatalf("after Close: %+v, %v; want aborted with agent.ErrClosed", res, err)
	}
}
