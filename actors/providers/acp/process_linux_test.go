package acp_test

import (
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract R3: a process the agent started that left its process group
// (setsid) is found by the agent's tag and ended with the agent, SIGTERM
// or not.
func TestR3_DisposeEndsAProcessThatLeftTheGroup(t *testing.T) {
	r, runaway, data, _ := startWithPid(t, modeRunaway)
	t.Cleanup(func() {
		if !processGone(runaway) {
			_ = syscall.Kill(runaway, syscall.SIGKILL)
		}
	})
	if _, group, ok := procStat(string(data)); !ok || group == r.ProcessID() || processGone(runaway) {
		t.Fatalf("runaway %d not running outside the agent's group %d before dispose", runaway, r.ProcessID())
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !processGone(runaway) {
		t.Fatalf("runaway %d outlived Dispose", runaway)
	}
}

// Contract R3: the agent's parent-death signal comes when the thread that
// started it ends, not the node (go.dev/issue/27505), and the Go runtime
// ends a thread whenever a goroutine returns locked to it. The agent
// lives on while the node's goroutines end threads.
func TestR3_AgentOutlivesTheThreadsOfItsNode(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, fakeConfig(t, sys, modeNormal)), request("say ready", "wait"))
	rec.waitFor(t, "the first chunk", kindIs(subagent.TextDelta))
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { runtime.LockOSThread() })
	}
	wg.Wait()
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, r); res.StopReason != subagent.Aborted || !strings.Contains(res.Detail, "the agent stopped its turn") {
		t.Fatalf("result %s: %s; the agent did not live to answer the cancel", res.StopReason, res.Detail)
	}
}
