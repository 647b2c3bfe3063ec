package acp_test

// P3 and Resume against a real coding agent that talks to a model:
// qwen-code (npm install -g @qwen-code/qwen-code@0.24.4, done by .ci/run)
// run as `qwen --acp` against the scripted OpenAI-compatible server. It
// advertises loadSession and replays history on load.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

const qwenInstall = "npm install -g @qwen-code/qwen-code@0.24.4"

// qwenConfig configures qwen against srv, with a home of its own (where it
// keeps its sessions) and its background memory extraction off, so that
// every model request it makes is one the test scripted.
func qwenConfig(t *testing.T, srv *openaitest.Server) acp.Config {
	t.Helper()
	bin, err := exec.LookPath("qwen")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("qwen-code is not installed: %s", qwenInstall)
		}
		t.Skipf("qwen-code is not installed (%s)", qwenInstall)
	}
	home := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".qwen"), 0o755))
	must(t, os.WriteFile(filepath.Join(home, ".qwen", "settings.json"),
		[]byte(`{"memory":{"enableManagedAutoMemory":false}}`), 0o644))
	return acp.Config{
		System: newSystem(t), Command: bin, Args: []string{"--acp"}, Dir: t.TempDir(),
		Env: map[string]string{
			"HOME":            home,
			"OPENAI_BASE_URL": srv.URL,
			"OPENAI_API_KEY":  "any",
			"OPENAI_MODEL":    "openaitest",
		},
		// A real agent's own start limit, not the test's deadline: a
		// Node.js agent takes seconds to start, more on a loaded machine.
		StartTimeout: qwenStart,
		CancelWait:   5 * time.Second,
		StopWait:     3 * time.Second,
	}
}

// qwenStart is qwen's start limit in the tests.
var qwenStart = testkit.Scale(2 * time.Minute)

// qwenCtx is the context a qwen run starts under: its start limit and
// then a test deadline for the turn. The run lives as long as its start
// context, so testkit.Ctx alone would end a turn that follows a slow start.
func qwenCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), qwenStart+testkit.Deadline)
	t.Cleanup(cancel)
	return ctx
}

// spare answers requests a test did not plan for (a retry, say), so that
// none of them fails the server's script.
func spare(steps ...openaitest.Step) []openaitest.Step {
	for range 4 {
		steps = append(steps, openaitest.Reply("spare"))
	}
	return steps
}

// Contract P3: a full turn of qwen-code: its model's answer is the output
// and the run settles completed; Dispose leaves no process of its group.
func TestP3_QwenTurn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, spare(openaitest.Step{Text: "Hello from the model.", ChunkSize: 6})...)
	rec := newRecorder()
	p := newProvider(t, qwenConfig(t, srv))
	began := time.Now()
	r := startScoped(t, qwenCtx(t), rec, p, request("Say hello."))
	started := time.Now()
	res := wait(t, r)
	t.Logf("qwen: start %s, turn %s", started.Sub(began), time.Since(started))
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "Hello from the model." {
		t.Fatalf("result %s %q %q", res.StopReason, subagent.TextOf(res.Output), res.Detail)
	}
	deltas := 0
	for _, ev := range rec.all() {
		if ev.Kind == subagent.TextDelta {
			deltas++
		}
	}
	if deltas < 2 {
		t.Fatalf("%d text deltas for a streamed answer", deltas)
	}
	must(t, r.Dispose(testkit.Ctx(t)))
	if !groupGone(r.ProcessID()) {
		t.Fatal("qwen outlived Dispose")
	}
}

// Contract P3 / S5: cancelling qwen mid-turn (its model request stalled)
// settles aborted on qwen's own answer to session/cancel.
func TestP3_QwenCancelMidTurn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, spare(openaitest.Stall(openaitest.Step{Text: "partial answer", ChunkSize: 8}, 2))...)
	rec := newRecorder()
	ctx, cancel := context.WithCancel(qwenCtx(t))
	r := startScoped(t, ctx, rec, newProvider(t, qwenConfig(t, srv)), request("Say something long."))
	rec.waitFor(t, "qwen's first text", kindIs(subagent.TextDelta))
	began := time.Now()
	cancel()
	res := wait(t, r)
	t.Logf("qwen: cancel→aborted %s", time.Since(began))
	if res.StopReason != subagent.Aborted || res.Detail != "cancelled; the agent stopped its turn" {
		t.Fatalf("result %+v", res)
	}
	if reqs := srv.WaitFinished(t, 1); !reqs[0].Cancelled {
		t.Fatalf("the stalled model request was not cancelled: %+v", reqs)
	}
}

// Contract P3 / R3: disposing qwen mid-turn leaves nothing of its process
// group.
func TestP3_QwenDisposeMidTurn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, spare(openaitest.Stall(openaitest.Step{Text: "partial answer", ChunkSize: 8}, 2))...)
	rec := newRecorder()
	r := startScoped(t, qwenCtx(t), rec, newProvider(t, qwenConfig(t, srv)), request("Say something long."))
	rec.waitFor(t, "qwen's first text", kindIs(subagent.TextDelta))
	pgid := r.ProcessID()
	began := time.Now()
	must(t, r.Dispose(testkit.Ctx(t)))
	t.Logf("qwen: dispose mid-turn %s", time.Since(began))
	if !groupGone(pgid) {
		t.Fatalf("qwen's process group %d outlived Dispose", pgid)
	}
	if res := wait(t, r); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}

// Contract S6 / P3: qwen advertises loadSession, so its child is resumed
// through session/load: the resumed turn's model request carries the
// earlier turn, and the history qwen replays stays out of the new output.
func TestS6_QwenResumeContinuesTheEarlierTurn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, spare(
		openaitest.Reply("I will remember PAPAYA."),
		openaitest.Reply("The word was PAPAYA."),
	)...)
	cfg := qwenConfig(t, srv)
	cfg.Store = persistence.NewMemory()
	p := newProvider(t, cfg)
	first := start(t, qwenCtx(t), p, request("Remember the word PAPAYA."))
	if res := wait(t, first); res.StopReason != subagent.Completed {
		t.Fatalf("first turn %+v", res)
	}
	must(t, first.Dispose(testkit.Ctx(t)))

	req := request("Which word did I ask you to remember?")
	req.Continuation = &subagent.Continuation{SessionID: first.SessionID()}
	began := time.Now()
	second, err := p.Resume(qwenCtx(t), subagent.Scope{}, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Dispose(context.Background()) })
	res := wait(t, second)
	t.Logf("qwen: resume→result %s", time.Since(began))
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "The word was PAPAYA." {
		t.Fatalf("resumed turn: %s %q %q", res.StopReason, subagent.TextOf(res.Output), res.Detail)
	}
	if second.(*acp.Run).AgentSessionID() != first.AgentSessionID() {
		t.Fatalf("resumed agent session %q, want %q", second.(*acp.Run).AgentSessionID(), first.AgentSessionID())
	}
	var resumed *openaitest.Request
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Raw), "Which word did I ask you") {
			resumed = &r
		}
	}
	if resumed == nil || !strings.Contains(string(resumed.Raw), "Remember the word PAPAYA.") || !strings.Contains(string(resumed.Raw), "I will remember PAPAYA.") {
		t.Fatalf("the resumed model request lacks the earlier turn: %v", resumed != nil)
	}
}
