package acp_test

// P3 against a real third-party agent: the ACP Go SDK's example agent
// (go install github.com/coder/acp-go-sdk/example/agent@v0.13.0, done by
// .ci/run). It needs no model: each turn streams text, runs a read tool,
// then asks permission for an edit, in about five seconds.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
	"github.com/subactor/subactor/subagent"
)

func exampleConfig(t *testing.T) acp.Config {
	return acp.Config{
		System: newSystem(t), Command: acptest.ExampleAgent(t), Dir: t.TempDir(),
		CancelWait: 2 * time.Second, StopWait: 2 * time.Second,
	}
}

// Contract P3: a full turn of a real agent: streamed text, a read tool
// call, and a permission request for an edit answered by the policy
// (rejected by the default one, allowed by allow-all), ending completed.
func TestP3_ExampleAgentFullTurnAnswersItsPermissionRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy acp.PermissionPolicy
		answer string
		says   string
	}{
		{"default policy rejects the edit", nil, "rejected: Modifying critical configuration file", "I understand you prefer not to make that change"},
		{"allow-all allows it", func(context.Context, acp.ToolCall) bool { return true }, "allowed: Modifying critical configuration file", "I've successfully updated the configuration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := exampleConfig(t)
			cfg.Permissions = c.policy
			rec := newRecorder()
			p := newProvider(t, cfg)
			began := time.Now()
			r, err := p.Start(testkit.Ctx(t), scoped(rec), request("Please improve the project"))
			if err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			res := wait(t, r)
			settled := time.Now()
			must(t, r.Dispose(testkit.Ctx(t)))
			t.Logf("example agent: start %s, turn %s, dispose %s", started.Sub(began), settled.Sub(started), time.Since(settled))
			if res.StopReason != subagent.Completed {
				t.Fatalf("result %+v", res)
			}
			out := subagent.TextOf(res.Output)
			if !strings.HasPrefix(out, "ACP Go Example Agent") || !strings.Contains(out, c.says) {
				t.Fatalf("output %q", out)
			}
			var tools, answers []string
			for _, ev := range rec.all() {
				switch ev.Kind {
				case subagent.ToolCallStarted:
					tools = append(tools, ev.Text)
				case acpdata.PermissionAnswered:
					answers = append(answers, ev.Text)
				}
			}
			if len(tools) != 2 || tools[0] != "Reading project files" || tools[1] != "Modifying critical configuration file" {
				t.Fatalf("tool calls %q", tools)
			}
			if len(answers) != 1 || answers[0] != c.answer {
				t.Fatalf("permission answers %q", answers)
			}
			if !groupGone(r.(*acp.Run).ProcessID()) {
				t.Fatal("the agent outlived Dispose")
			}
		})
	}
}

// Contract P3 / S5: cancelling a real agent mid-turn settles aborted on
// its own answer to session/cancel, well within CancelWait.
func TestP3_ExampleAgentCancelMidTurnSettlesAborted(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	p := newProvider(t, exampleConfig(t))
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := startScoped(t, ctx, rec, p, request("Please improve the project"))
	rec.waitFor(t, "the agent's first text", kindIs(subagent.TextDelta))
	began := time.Now()
	cancel()
	res := wait(t, r)
	t.Logf("example agent: cancel→aborted %s", time.Since(began))
	if res.StopReason != subagent.Aborted || res.Detail != "cancelled; the agent stopped its turn" {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(subagent.TextOf(res.Output), "ACP Go Example Agent") {
		t.Fatalf("output %+v", res.Output)
	}
}

// Contract P3 / R3: disposing a real agent mid-turn leaves no process
// behind: its process group is gone when Dispose returns.
func TestP3_ExampleAgentDisposeMidTurnLeavesNoProcess(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	p := newProvider(t, exampleConfig(t))
	r := startScoped(t, testkit.Ctx(t), rec, p, request("Please improve the project"))
	rec.waitFor(t, "the first tool call", kindIs(subagent.ToolCallStarted))
	pgid := r.ProcessID()
	if groupGone(pgid) {
		t.Fatal("the agent is not running mid-turn")
	}
	began := time.Now()
	must(t, r.Dispose(testkit.Ctx(t)))
	t.Logf("example agent: dispose mid-turn %s", time.Since(began))
	if !groupGone(pgid) {
		t.Fatalf("process group %d outlived Dispose", pgid)
	}
	if res := wait(t, r); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}
