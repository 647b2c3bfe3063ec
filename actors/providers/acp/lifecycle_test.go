package acp_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract S5 (through P3): the start context ending mid-turn sends
// session/cancel while the prompt stays open; the agent answers cancelled
// and the result settles aborted with what the agent said so far.
func TestS5_CancelMidTurnSettlesAbortedOnTheAgentsAnswer(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := startScoped(t, ctx, rec, newProvider(t, fakeConfig(t, sys, modeNormal)), request("say before", "wait", "say after"))
	rec.waitFor(t, "the first chunk", kindIs(subagent.TextDelta))
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.Aborted || !strings.Contains(res.Detail, "stopped its turn") {
		t.Fatalf("result %+v", res)
	}
	if errors.Is(res.Cause, acp.ErrCancelUnanswered) || !errors.Is(res.Cause, context.Canceled) {
		t.Fatalf("cause %v", res.Cause)
	}
	if subagent.TextOf(res.Output) != "before" {
		t.Fatalf("output %+v", res.Output)
	}
}

// Contract P3: a permission request pending when the turn is cancelled is
// answered cancelled: the policy's context ends and the agent hears so.
func TestP3_PendingPermissionIsCancelledWithTheTurn(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	asked := make(chan struct{})
	cfg.Permissions = func(ctx context.Context, _ acp.ToolCall) bool {
		close(asked)
		<-ctx.Done() // a person who never answers
		return true
	}
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := start(t, ctx, newProvider(t, cfg), request("ask edit Change a file", "wait"))
	testkit.Recv(t, asked, "the permission request")
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.Aborted || subagent.TextOf(res.Output) != "perm:cancelled;" {
		t.Fatalf("result %+v", res)
	}
}

// Contract R3: Dispose mid-turn cancels the turn, ends the agent's whole
// process group and reaps it; it is idempotent and safe to call
// concurrently.
func TestR3_DisposeIsIdempotentConcurrentAndEndsTheGroup(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, fakeConfig(t, sys, modeNormal)), request("say a", "wait"))
	rec.waitFor(t, "the first chunk", kindIs(subagent.TextDelta))
	pgid := r.ProcessID()
	if pgid <= 0 || groupGone(pgid) {
		t.Fatalf("process group %d before dispose", pgid)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- r.Dispose(testkit.Ctx(t)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !groupGone(pgid) {
		t.Fatalf("process group %d outlived Dispose", pgid)
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, r); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}

// Contract R3: processes the agent started in its group are ended too,
// even one that ignores SIGTERM and holds the agent's output open after
// the agent itself has gone.
func TestR3_DisposeEndsGrandchildren(t *testing.T) {
	r, grandchild, data, cfg := startWithPid(t, modeGrandchild)
	if grandchild <= 0 || processGone(grandchild) {
		t.Fatalf("grandchild %q not running before dispose", data)
	}
	began := time.Now()
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !processGone(grandchild) || !groupGone(r.ProcessID()) {
		t.Fatalf("grandchild %d or group %d outlived Dispose", grandchild, r.ProcessID())
	}
	// Leader gone at once, then SIGTERM, StopWait, SIGKILL for the grandchild.
	if took := time.Since(began); took < cfg.StopWait {
		t.Fatalf("ended in %s: the grandchild cannot have resisted SIGTERM", took)
	} else {
		t.Logf("dispose with a SIGTERM-proof grandchild took %s", took)
	}
}

// Contract R3: the agent's process ends with its turn (each activation is
// one turn): once the result has settled, no process of the child is left.
func TestR3_ProcessEndsWithTheTurn(t *testing.T) {
	sys := newSystem(t)
	r := start(t, testkit.Ctx(t), newProvider(t, fakeConfig(t, sys, modeNormal)), request("say done"))
	if res := wait(t, r); res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	if !groupGone(r.ProcessID()) {
		t.Fatalf("process group %d outlived the settled turn", r.ProcessID())
	}
}

// Contract K3: an agent that never answers session/cancel, ignores the end
// of its input and SIGTERM is still ended: the turn is abandoned after
// CancelWait, settles aborted, and the ladder reaches SIGKILL.
func TestK3_AgentIgnoringCancelIsEndedByTheLadder(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	cfg := fakeConfig(t, sys, modeStubborn)
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := startScoped(t, ctx, rec, newProvider(t, cfg), request("say a", "hang"))
	rec.waitFor(t, "the first chunk", kindIs(subagent.TextDelta))
	began := time.Now()
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.Aborted || !errors.Is(res.Cause, acp.ErrCancelUnanswered) {
		t.Fatalf("result %+v (cause %v)", res, res.Cause)
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !groupGone(r.ProcessID()) {
		t.Fatal("the stubborn agent outlived Dispose")
	}
	// CancelWait, then the ladder: stdin, SIGTERM, SIGKILL.
	if took := time.Since(began); took < cfg.CancelWait+2*cfg.StopWait {
		t.Fatalf("ended in %s: the agent cannot have resisted the ladder", took)
	} else {
		t.Logf("cancel→settle→dispose of an agent ignoring everything: %s", took)
	}
}
