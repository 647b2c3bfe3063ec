package main

// run -cluster (K1, P4): the top agent of a survey delegates through the
// cluster to the ACP agent another node's serve offers, one node per OS
// process on loopback as in cluster_linux_test.go.

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/testkit/openaitest"
)

// Contracts K1, P4, R1: run -cluster on node A gives its top agent a
// delegate tool for "fake", which only node B offers; the model (a
// scripted OpenAI endpoint) calls it and the child runs on B's agent: its
// answer is the fake agent's echo, A has no agent of its own, and A's
// events say so (no "local":true, no session here). The survey completes,
// its session is in A's data directory, and B's agent process is gone
// once A disposed the child. Static member list.
func TestK1_P4_RunDelegatesThroughTheCluster(t *testing.T) {
	a, b := newMember(t), newMember(t)
	testRunDelegatesRemotely(t, a, b, static(a, b))
}

// Contracts K1, P4, R1: the same with the membership in a real etcd.
func TestK1_P4_RunDelegatesThroughTheClusterEtcd(t *testing.T) {
	testRunDelegatesRemotely(t, newMember(t), newMember(t), etcdServer(t))
}

func testRunDelegatesRemotely(t *testing.T, a, b member, how membership) {
	nodeB, _ := serve(t, b, how)
	srv := openaitest.NewServer(t,
		openaitest.Calls(openaitest.ToolCall{ID: "call_1", Name: "fake", Args: `{"description": "ask fake", "prompt": "remote one"}`}),
		openaitest.Reply("The remote agent answered."))
	data := t.TempDir()
	env := append(withData(data), envBaseURL+"="+srv.URL, envAPIKey+"=sk", envModel+"=m")
	args := append([]string{"run", "-json", "-cluster", "-provider", "fake"}, how(a)...)
	stdout, stderr, code := nodeEnv(t, writeTree(t), env, args...)
	if code != 0 {
		t.Fatalf("run exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "run: waiting for members offering fake...") {
		t.Fatalf("stderr does not say what run waits for:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var starts, ends []string
	for _, l := range lines {
		switch {
		case startEvent.MatchString(l):
			starts = append(starts, l)
		case endEvent.MatchString(l):
			ends = append(ends, l)
		}
	}
	if len(starts) != 1 || !strings.Contains(starts[0], `"provider":"fake"`) || strings.Contains(starts[0], `"local":true`) || strings.Contains(starts[0], `"sessionId"`) {
		t.Fatalf("want one start of a remote child of fake (local false, no session here), got %q", starts)
	}
	if len(ends) != 1 || !strings.Contains(ends[0], `"stopReason":"completed"`) {
		t.Fatalf("want the child completed, got %q", ends)
	}
	var res jsonResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Type != typeResult || res.StopReason != "completed" || res.Answer != "The remote agent answered." {
		t.Fatalf("result line %s (%v)", lines[len(lines)-1], err)
	}
	reqs := srv.WaitFinished(t, 2)
	if !slices.ContainsFunc(reqs[0].Tools, func(tl openaitest.Tool) bool { return tl.Function.Name == "fake" }) {
		t.Fatalf("the top agent was not offered the tool fake: %+v", reqs[0].Tools)
	}
	if !slices.ContainsFunc(reqs[1].Messages, func(m openaitest.Message) bool {
		return m.Role == "tool" && strings.Contains(m.Text(), "echo: remote one")
	}) {
		t.Fatalf("no tool answer from B's agent in %+v", reqs[1].Messages)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent process to be gone after A disposed the child")
	listing, _, _ := nodeEnv(t, t.TempDir(), withData(data), "sessions")
	if !strings.Contains(listing, res.SessionID+" ") {
		t.Fatalf("sessions of A's data directory:\n%s\nwant %s", listing, res.SessionID)
	}
}

// Contract K1: run -cluster refuses flags it cannot use with exit 2,
// before it joins anything.
func TestK1_RunClusterBadFlagsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-provider", "fake"}, "give -cluster too"},
		{[]string{"-cluster", "-peers", "127.0.0.1:1"}, "-cluster needs -provider"},
		{[]string{"-cluster", "-provider", "spawn", "-peers", "127.0.0.1:1"}, `"spawn" is the name of the node's own provider`},
		{[]string{"-cluster", "-provider", "a,a", "-peers", "127.0.0.1:1"}, `"a" is named twice`},
		{[]string{"-cluster", "-provider", "fake", "-config", fakeConfig(t), "-peers", "127.0.0.1:1"}, `"fake" is also an agent server of -config`},
		{[]string{"-cluster", "-provider", "fake"}, "a cluster needs -peers"},
	} {
		_, stderr, code := node(t, writeTree(t), append([]string{"run"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.msg) {
			t.Errorf("run %q: exit %d, stderr %q, want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
}
