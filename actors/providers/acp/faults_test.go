package acp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contract K3 / R6: an agent that exits before initialize is a typed
// Start error saying how it ended and what it wrote on stderr; nothing
// is left: no process, no session row.
func TestK3_AgentExitingBeforeInitializeFailsStart(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeExitEarly)
	store := persistence.NewMemory()
	cfg.Store = store
	_, err := newProvider(t, cfg).Start(testkit.Ctx(t), subagent.Scope{}, request("say x"))
	var se *acp.StartError
	if !errors.As(err, &se) || !errors.Is(err, acp.ErrStart) || se.Step != "initialize" {
		t.Fatalf("err %v", err)
	}
	if se.Exit != "exit status 3" || !strings.Contains(se.Stderr, "cannot start") {
		t.Fatalf("exit %q, stderr %q", se.Exit, se.Stderr)
	}
	assertNothingLeft(t, cfg, store)
}

// Contract K3: an agent answering initialize with another protocol
// version is refused (ErrStart naming both versions) and ended.
func TestK3_UnsupportedProtocolVersionFailsStart(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeBadVersion)
	_, err := newProvider(t, cfg).Start(testkit.Ctx(t), subagent.Scope{}, request("say x"))
	if !errors.Is(err, acp.ErrStart) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("err %v", err)
	}
	assertNothingLeft(t, cfg, nil)
}

// Contract S5 / R6: a start whose context ends while the agent has not
// answered initialize returns the context's error after rollback, and
// one that never answers within StartTimeout fails typed; both leave no
// process.
func TestR6_StartThatNeverGetsASessionLeavesNothing(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeHangInit)
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	p := newProvider(t, cfg)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Start(ctx, subagent.Scope{}, request("say x"))
		errc <- err
	}()
	waitForStarts(t, cfg, 1)
	cancel()
	if err := testkit.Recv(t, errc, "Start to return"); !errors.Is(err, subagent.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled start: %v", err)
	}
	assertNothingLeft(t, cfg, nil)

	// Long enough for the agent to start and record itself on a loaded
	// machine, so that what it left can be checked.
	cfg = fakeConfig(t, sys, modeHangInit)
	cfg.StartTimeout = testkit.Scale(time.Second)
	_, err := newProvider(t, cfg).Start(testkit.Ctx(t), subagent.Scope{}, request("say x"))
	var se *acp.StartError
	if !errors.As(err, &se) || se.Step != "initialize" || !strings.Contains(err.Error(), fmt.Sprintf("no answer within %s", cfg.StartTimeout)) {
		t.Fatalf("timed-out start: %v", err)
	}
	assertNothingLeft(t, cfg, nil)
}

// Contract K3: an agent that crashes mid-turn settles error (no hang),
// keeping what it said, its exit status and its last words on stderr.
func TestK3_CrashMidTurnSettlesError(t *testing.T) {
	sys := newSystem(t)
	r := start(t, testkit.Ctx(t), newProvider(t, fakeConfig(t, sys, modeNormal)), request("say partial", "crash 7"))
	res := wait(t, r)
	if res.StopReason != subagent.Error || !errors.Is(res.Cause, acp.ErrAgentExited) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Detail, "exit status 7") || !strings.Contains(res.Detail, "crashing on purpose") {
		t.Fatalf("detail %q", res.Detail)
	}
	if subagent.TextOf(res.Output) != "partial" {
		t.Fatalf("output %+v", res.Output)
	}
}

// Contract K3: lines that are not JSON-RPC, unknown update kinds, unknown
// content, notifications and responses nobody asked for are ignored; the
// turn completes with exactly the agent's real text.
func TestK3_GarbageAndUnknownFramesAreIgnored(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, fakeConfig(t, sys, modeNormal)),
		request("say a", "garbage", "unknown", "orphan", "say b"))
	res := wait(t, r)
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "ab" {
		t.Fatalf("result %+v", res)
	}
	for _, ev := range rec.all() {
		if strings.Contains(ev.Text, "UNKNOWN") || strings.Contains(ev.Text, "HOLO") {
			t.Fatalf("an unknown update became progress: %+v", ev)
		}
	}
}

// Contract K3: a line longer than MaxLine closes the connection: the turn
// settles error saying so, without waiting for the agent.
func TestK3_OverlongLineSettlesError(t *testing.T) {
	sys := newSystem(t)
	r := start(t, testkit.Ctx(t), newProvider(t, fakeConfig(t, sys, modeNormal)), request("say a", "overlong", "wait"))
	res := wait(t, r)
	if res.StopReason != subagent.Error || !errors.Is(res.Cause, acp.ErrLineTooLong) || !strings.Contains(res.Detail, "longer than") {
		t.Fatalf("result %+v (cause %v)", res, res.Cause)
	}
}

// Contract K3 / E5: an agent flooding updates faster than the parent's
// listener consumes them costs bounded memory: the kept answer is capped
// (and says so), the slow listener is detached with an overflow notice,
// and the turn completes.
func TestK3_FloodingAgentCostsBoundedMemory(t *testing.T) {
	sys := newSystem(t)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.MaxOutput = 1000
	release, err := svc.RegisterProvider(newProvider(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	overflow := make(chan subagent.ListenerOverflow, 1)
	unblock := make(chan struct{})
	sub := svc.ListenParent(top.SessionID(), func(ev subagent.Event) error {
		if o, ok := ev.(subagent.ListenerOverflow); ok {
			overflow <- o
			return nil
		}
		<-unblock // a listener that does not keep up
		return nil
	}, registry.ListenBound(16))
	t.Cleanup(sub.Release)
	var once sync.Once
	release2 := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release2)

	const chunks = 20000 // 2 MB of text in 100-byte chunks
	r, err := svc.Start(testkit.Ctx(t), acp.DefaultName, request("flood 20000", "say end"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	res := wait(t, r)
	if res.StopReason != subagent.Completed {
		t.Fatalf("result %s %q", res.StopReason, res.Detail)
	}
	dropped := fmt.Sprintf("%d more bytes", chunks*100+len("end")-cfg.MaxOutput)
	if len(res.Output) != 2 || len(res.Output[0].Text) != cfg.MaxOutput || !strings.Contains(res.Output[1].Text, dropped) {
		t.Fatalf("output: %d blocks, first %d bytes, note %q", len(res.Output), len(res.Output[0].Text), res.Output[len(res.Output)-1].Text)
	}
	release2() // now the listener catches up with its queue and learns it fell behind
	if o := testkit.Recv(t, overflow, "the slow listener's overflow notice"); o.Bound != 16 {
		t.Fatalf("overflow %+v", o)
	}
}

// Contract K3: an agent that does not start within Config.StartTimeout
// fails Start with ErrStart matching context.DeadlineExceeded, naming the step it was waiting for:
// initialize, or session/new with how long initialize took (the limit is
// the whole start's).
func TestK3_StartLimitNamesTheStep(t *testing.T) {
	sys := newSystem(t)
	for _, c := range []struct {
		mode, step, says string
		limit            time.Duration
	}{
		{modeHangInit, "initialize", "initialize: acp: start limit reached: no answer within 300ms", 300 * time.Millisecond},
		// Long enough for the agent to get as far as session/new on a
		// loaded machine.
		{modeHangNew, "session/new", "session/new: acp: start limit reached: no answer within 5s (initialize answered after ", 5 * time.Second},
	} {
		cfg := fakeConfig(t, sys, c.mode)
		cfg.StartTimeout = c.limit
		_, err := newProvider(t, cfg).Start(testkit.Ctx(t), subagent.Scope{}, request("say x"))
		var se *acp.StartError
		if !errors.As(err, &se) || se.Step != c.step || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v", c.mode, err)
		}
		assertNothingLeft(t, cfg, nil)
	}
}

// assertNothingLeft checks that every fake agent started under cfg is
// gone, and that store (when given) holds no session.
func assertNothingLeft(t *testing.T, cfg acp.Config, store persistence.Store) {
	t.Helper()
	pids := startedPids(t, cfg)
	if len(pids) == 0 {
		t.Fatal("no agent was started")
	}
	for _, pid := range pids {
		if !groupGone(pid) {
			t.Fatalf("agent process group %d outlived the failed start", pid)
		}
	}
	if store != nil {
		if s, err := store.Sessions(context.Background()); err != nil || len(s) != 0 {
			t.Fatalf("sessions left: %+v %v", s, err)
		}
	}
}

// waitForStarts waits until n fake agents have started under cfg.
func waitForStarts(t *testing.T, cfg acp.Config, n int) {
	t.Helper()
	deadline := time.Now().Add(testkit.Deadline)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for starts(t, cfg) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %d agents to start", testkit.Deadline, n)
		}
		<-tick.C
	}
}
