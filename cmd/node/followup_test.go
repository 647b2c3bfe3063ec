package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
	"github.com/subactor/subactor/internal/testkit/openaitest"
)

// historyConfig is a -config file whose one server, "fake", is the fake
// agent keeping its sessions in dir, so that it can load them.
func historyConfig(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := json.Marshal(map[string]any{
		"command": exe,
		"env":     map[string]string{envFakeAgent: "1", envFakeAgentHistory: dir, "GORACE": "atexit_sleep_ms=0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, `{"agent_servers": {"fake": `+string(entry)+`}}`)
}

// Contracts S7, S8, T3 (issue 16): a node killed (SIGKILL) while its
// continuable child works leaves the truth behind: a new node process on
// the same data directory lists the activation's task as interrupted, and
// `send` follows the child up: it is resumed from its log (session/load),
// sees its earlier turn, and answers.
func TestS8_AfterANodeDiedTasksSayInterruptedAndSendResumesTheChild(t *testing.T) {
	data, agentDir := t.TempDir(), t.TempDir()
	config := historyConfig(t, agentDir)
	cmd := exec.CommandContext(testkit.Ctx(t), bin, "delegate", "-json", "-config", config, "wait for it")
	cmd.Env = append(os.Environ(), withData(data)...)
	lines := startLines(t, cmd)
	var session, child string
	for {
		line := testkit.Recv(t, lines, "the child's first text")
		if line == "" {
			t.Fatal("the node ended before the child's text")
		}
		var ev struct{ Type, Kind, SessionID string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch {
		case ev.Type == typeSession:
			session = ev.SessionID
		case ev.Type == "subagent/start":
			child = ev.SessionID
		case ev.Kind == "text-delta":
		default:
			continue
		}
		if ev.Kind == "text-delta" {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for range lines {
	}

	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "tasks", session)
	if code != 0 || !strings.Contains(stdout, "child="+child) || !strings.Contains(stdout, "state=interrupted") || !strings.Contains(stdout, " continuable") {
		t.Fatalf("tasks after the kill: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "send", "-config", config, session, child, "and", "now")
	if code != 0 || !strings.HasSuffix(stdout, "\n\necho: and now (earlier: wait for it)\n") {
		t.Fatalf("send: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, _, _ = nodeEnv(t, t.TempDir(), withData(data), "tasks", session)
	if got := strings.Split(strings.TrimSpace(stdout), "\n"); len(got) != 2 || !strings.Contains(got[0], "state=interrupted") || !strings.Contains(got[1], "state=completed") {
		t.Fatalf("tasks after the follow-up:\n%s", stdout)
	}
	// Only the owner's children take follow-ups.
	if _, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "send", "-config", config, session, "no-such-child", "hi"); code != exitFailed || !strings.Contains(stderr, "not a child of session") {
		t.Fatalf("send to a child the session does not own: exit %d, %s", code, stderr)
	}
}

// Contracts S6, P3 (issue 17), K4: delegate -continue SESSION PROMPT goes on
// with the delegate session's child through the provider's resume
// (session/load): the agent sees its earlier turn. The messages that
// point elsewhere name a command that works: run -continue on the child
// or on the delegate session points to delegate -continue.
func TestS6_DelegateContinueResumesTheChild(t *testing.T) {
	data := t.TempDir()
	config := historyConfig(t, t.TempDir())
	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "first")
	if code != 0 {
		t.Fatalf("delegate: exit %d, %s", code, stderr)
	}
	session, _ := cutSession(t, stdout)
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "-continue", session, "second")
	if code != 0 || !strings.HasSuffix(stdout, "\n\necho: second (earlier: first)\n") {
		t.Fatalf("delegate -continue: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	kids := parseListing(t, func() string { out, _, _ := nodeEnv(t, t.TempDir(), withData(data), "sessions", session); return out }())
	// The child says which server it runs on and the agent's own session,
	// and its turns (two prompts, two answers) and first prompt as any
	// child does (K4).
	if len(kids) != 2 || kids[1].server != "fake" || !strings.HasPrefix(kids[1].agentSession, "fake-") || kids[0].server != "" ||
		kids[1].turns != 4 || kids[1].prompt != "first" || kids[1].state != "completed" {
		t.Fatalf("sessions %s lists %+v", session, kids)
	}
	hint := "delegate -continue " + session + " PROMPT"
	for _, id := range []string{session, kids[1].id} {
		if _, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "run", "-continue", id); code == 0 || !strings.Contains(stderr, hint) {
			t.Errorf("run -continue %s: exit %d, stderr %q lacks %q", id, code, stderr, hint)
		}
	}
}

// Contract S6 (issue 17): run -continue with no prompt on a session whose
// last run completed says so, exits 0 and appends nothing.
func TestS6_ContinuingACompleteSessionAppendsNothing(t *testing.T) {
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, writeTree(t), withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, %s", code, stderr)
	}
	session, _ := cutSession(t, stdout)
	before := logOf(t, data, session)
	_, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "run", "-continue", session)
	if code != 0 || !strings.Contains(stderr, "the session is complete") {
		t.Fatalf("run -continue of a complete session: exit %d, stderr %q", code, stderr)
	}
	if after := logOf(t, data, session); len(after) != len(before) {
		t.Fatalf("the log grew from %d to %d records", len(before), len(after))
	}
}

// Contracts S6, P3 (issue 17) with qwen-code on the scripted model
// server: delegate -continue SESSION PROMPT resumes the child through
// session/load, and the agent's model request carries its earlier turn;
// sessions shows the child's server and the agent's own session.
func TestS6_DelegateContinueOnQwenSeesItsEarlierTurn(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Reply("I will remember PAPAYA."), openaitest.Reply("The word was PAPAYA."),
		openaitest.Reply("spare"), openaitest.Reply("spare"))
	_, config := qwenConfig(t, srv)
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "Remember the word PAPAYA.")
	if code != 0 || !strings.HasSuffix(stdout, "\n\nI will remember PAPAYA.\n") {
		t.Fatalf("delegate: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	session, _ := cutSession(t, stdout)
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "-continue", session, "Which word did I ask you to remember?")
	if code != 0 || !strings.HasSuffix(stdout, "\n\nThe word was PAPAYA.\n") {
		t.Fatalf("delegate -continue: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var resumed string
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Raw), "Which word did I ask you") {
			resumed = string(r.Raw)
		}
	}
	if !strings.Contains(resumed, "Remember the word PAPAYA.") || !strings.Contains(resumed, "I will remember PAPAYA.") {
		t.Fatalf("the resumed model request lacks the earlier turn: %s", resumed)
	}
	stdout, _, _ = nodeEnv(t, t.TempDir(), withData(data), "sessions", session)
	if kids := parseListing(t, stdout); len(kids) != 2 || kids[1].server != "qwen" || kids[1].agentSession == "" {
		t.Fatalf("sessions %s lists %+v", session, kids)
	}
}

// Contracts S6, P3 (issue 17) with the ACP Go SDK's example agent, which
// does not advertise loadSession: delegate -continue says that its child
// cannot be continued and why, exit 1, and the child's log stays as it
// was.
func TestS6_DelegateContinueOnTheExampleAgentSaysWhyItCannot(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, fmt.Sprintf(`{"agent_servers": {"example": {"command": %q}}}`, acptest.ExampleAgent(t)))
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "Please improve the project")
	if code != 0 {
		t.Fatalf("delegate: exit %d, %s", code, stderr)
	}
	session, _ := cutSession(t, stdout)
	stdout, _, _ = nodeEnv(t, t.TempDir(), withData(data), "sessions", session)
	kids := parseListing(t, stdout)
	if len(kids) != 2 || kids[1].server != "example" {
		t.Fatalf("sessions %s lists %+v", session, kids)
	}
	before := logOf(t, data, kids[1].id)
	_, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", config, "-continue", session, "again")
	if code != exitFailed || !strings.Contains(stderr, "child is not resumable: its agent did not advertise loadSession") {
		t.Fatalf("delegate -continue: exit %d, stderr %q", code, stderr)
	}
	if after := logOf(t, data, kids[1].id); len(after) != len(before) {
		t.Fatalf("the child's log grew from %d to %d records", len(before), len(after))
	}
}
