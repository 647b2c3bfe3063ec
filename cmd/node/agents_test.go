package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/subagent"
)

// writeConfig writes a -config file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agents.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeServer is the agent_servers entry of the fake agent (the test binary
// re-executed, see fakeagent_test.go).
func fakeServer(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := json.Marshal(map[string]any{
		"command": exe,
		// A race-enabled binary sleeps a second before it exits, which
		// every dispose would wait for.
		"env": map[string]string{envFakeAgent: "1", "GORACE": "atexit_sleep_ms=0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(entry)
}

// fakeConfig is a -config file whose one server, "fake", is the fake agent.
func fakeConfig(t *testing.T) string {
	return writeConfig(t, `{"agent_servers": {"fake": `+fakeServer(t)+`}}`)
}

// hangingConfig is a -config file whose one server, "fake", is the fake
// agent never answering initialize.
func hangingConfig(t *testing.T) string {
	return writeConfig(t, strings.Replace(`{"agent_servers": {"fake": `+fakeServer(t)+`}}`, `"`+envFakeAgent+`":"1"`, `"`+envFakeAgent+`":"`+fakeHangInit+`"`, 1))
}

// Progress lines of an ACP child: its tool calls, plan and permission
// answers are steps of its one turn.
var (
	startingLine   = regexp.MustCompile(`(?m)^child \S{12} starting fake\.\.\.$`)
	planLine       = regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] step 1 plan \[in_progress\] Echo the prompt$`)
	fakeToolLine   = regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] step 1 tool Reading the prompt$`)
	completedLine  = regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] ended: completed in \S+$`)
	startedLineAny = regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] started$`)
)

// Contracts P3, N1: node delegate runs one child on the configured agent
// server through the Service: the parent's session, the child's progress
// (its agent starting, start, plan, tool call, final text, end), a blank
// line and its output;
// exit 0. The parent's session is kept in the data directory with the
// child under it, listed with the delegated prompt and the child's stop
// reason.
func TestP3_DelegatePrintsProgressAndOutput(t *testing.T) {
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "delegate", "-config", fakeConfig(t), "-provider", "fake", "hello", "world")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// The output on stdout, the progress on stderr.
	id, output := cutSession(t, stdout)
	progress := strings.TrimSuffix(stderr, "\n")
	if output != "\necho: hello world\n" {
		t.Fatalf("output %q; stdout:\n%s", output, stdout)
	}
	for _, re := range []*regexp.Regexp{startingLine, startedLineAny, planLine, fakeToolLine, regexp.MustCompile(`(?m)^child \S{12} \[hello world\] step 1 final echo: hello world$`), completedLine} {
		if !re.MatchString(progress) {
			t.Errorf("no line matching %s in the progress:\n%s", re, progress)
		}
	}
	if n := len(strings.Split(progress, "\n")); n != 6 || !strings.HasPrefix(progress, "child ") || progress[6:18] != progress[len(progress)-len(completedLine.FindString(progress)):][6:18] {
		t.Errorf("%d progress lines, want 6, of one child:\n%s", n, progress)
	}

	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "sessions", id)
	if code != 0 {
		t.Fatalf("sessions: exit %d, stderr %s", code, stderr)
	}
	listed := parseListing(t, stdout)
	if len(listed) != 2 || listed[0].id != id || listed[0].state != "completed" || listed[0].prompt != "hello world" || listed[1].depth != 1 {
		t.Fatalf("sessions %s:\n%s", id, stdout)
	}
}

// Contracts P3, E6: delegate -json prints the parent's session, every
// event of the child in order (its provider named, not local), then the
// result with the output.
func TestP3_DelegateJSONLines(t *testing.T) {
	stdout, stderr, code := node(t, t.TempDir(), "delegate", "-json", "-config", fakeConfig(t), "say it")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	type record struct {
		jsonEvent
		Answer string `json:"answer"`
	}
	var types, kinds []string
	var first, last record
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var r record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		if i == 0 {
			first = r
		}
		last = r
		types = append(types, r.Type)
		switch r.Type {
		case subagent.TypeOf(subagent.RunStarted{}), subagent.TypeOf(subagent.RunEnded{}):
			if r.Provider != "fake" || r.Local {
				t.Fatalf("line %d: %q", i+1, line)
			}
		case subagent.TypeOf(subagent.RunProgress{}):
			kinds = append(kinds, r.Kind)
		}
	}
	if first.Type != typeSession || len(first.SessionID) != 36 {
		t.Fatalf("first line %+v, want the session", first)
	}
	if last.Type != typeResult || last.SessionID != first.SessionID || last.StopReason != "completed" || last.Answer != "echo: say it" {
		t.Fatalf("last line %+v, want the result", last)
	}
	if types[1] != "subagent/start" || types[len(types)-2] != "subagent/end" {
		t.Fatalf("record types %q", types)
	}
	want := []string{"acp-plan", "tool-call-started", "tool-call-finished", "text-delta", "text-delta", "message-text"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("progress kinds %q, want %q", kinds, want)
	}
}

// Contracts P3, N1: a child that does not complete exits 1 with its stop
// reason and the agent's words on stderr; its output is still printed.
func TestP3_DelegateNotCompletedExitsOne(t *testing.T) {
	stdout, stderr, code := node(t, t.TempDir(), "delegate", "-config", fakeConfig(t), "refuse", "this")
	if code != exitFailed || !strings.Contains(stderr, "node delegate: the child ended refusal: the agent refused") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.HasSuffix(stdout, "\n\nI will not do that.\n") || !regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] ended: refusal in `).MatchString(stderr) {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// startLines starts cmd and sends the lines of its stdout, closing the
// channel when it ends.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	return startPipeLines(t, cmd, cmd.StdoutPipe)
}

// startErrLines is startLines on cmd's stderr, where progress goes.
func startErrLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	return startPipeLines(t, cmd, cmd.StderrPipe)
}

func startPipeLines(t *testing.T, cmd *exec.Cmd, pipe func() (io.ReadCloser, error)) <-chan string {
	t.Helper()
	out, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// Contracts P3, S5, N1: SIGINT mid-turn cancels the child (session/cancel),
// which settles aborted: exit 130 with "interrupted", the stop reason on
// stderr, the end event and the result still printed.
func TestP3_DelegateInterruptedExits130(t *testing.T) {
	cmd := exec.CommandContext(testkit.Ctx(t), bin, "delegate", "-json", "-config", fakeConfig(t), "wait for it")
	cmd.Env = append(os.Environ(), withData(t.TempDir())...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	lines := startLines(t, cmd)
	var all []string
	for {
		// JSON lines are never empty: "" is the closed channel.
		line := testkit.Recv(t, lines, "the agent's first text")
		if line == "" {
			t.Fatalf("the node ended before the agent's text; stdout %q, stderr %q", all, stderr.String())
		}
		all = append(all, line)
		if strings.Contains(line, `"kind":"text-delta"`) {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		all = append(all, line)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.HasSuffix(stderr.String(), "node delegate: the child ended aborted: cancelled; the agent stopped its turn\nnode: interrupted\n") {
		t.Fatalf("exit %d (%v), stderr %q", code, err, stderr.String())
	}
	// The child's task ends killed: no answer, but its end event keeps
	// the last words the agent said.
	end, result := all[len(all)-2], all[len(all)-1]
	if !strings.Contains(end, `"type":"subagent/end"`) || !strings.Contains(end, `"stopReason":"aborted"`) || !strings.Contains(end, `"lastAssistantMessage":"waiting"`) ||
		!strings.Contains(result, `"type":"node/result"`) || !strings.Contains(result, `"answer":""`) {
		t.Fatalf("last lines %q and %q", end, result)
	}
}

// Contracts P3, S5, N1, K3: Ctrl-C while the agent starts (it never
// answers initialize) ends the child aborted, not in error: piped, its
// start and its end are printed; with -json the result line still comes;
// exit 130 (Ctrl-C, piped) or 143 (SIGTERM, with -json) with the stop
// reason and "interrupted" on stderr; the parent's session is listed
// aborted.
func TestP3_DelegateInterruptedWhileTheAgentStarts(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		data := t.TempDir()
		args := []string{"delegate", "-config", hangingConfig(t), "hello"}
		if asJSON {
			args = slices.Insert(args, 1, "-json")
		}
		cmd := exec.CommandContext(testkit.Ctx(t), bin, args...)
		cmd.Env = append(os.Environ(), withData(data)...)
		// Piped, the start is shown on stderr; with -json the session line
		// is the last on stdout before the start.
		var stderr bytes.Buffer
		var lines <-chan string
		ready := startingLine
		if asJSON {
			cmd.Stderr = &stderr
			lines, ready = startLines(t, cmd), regexp.MustCompile(`"type":"node/session"`)
		} else {
			lines = startErrLines(t, cmd)
		}
		var all []string
		for {
			line := testkit.Recv(t, lines, "the agent's start")
			if line == "" {
				t.Fatalf("the node ended before the start; stdout %q, stderr %q", all, stderr.String())
			}
			all = append(all, line)
			if ready.MatchString(line) {
				break
			}
		}
		sig, want := os.Signal(os.Interrupt), 130
		if asJSON {
			sig, want = syscall.SIGTERM, 143
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		for line := range lines {
			all = append(all, line)
		}
		err := cmd.Wait()
		errText := stderr.String()
		if !asJSON {
			errText = strings.Join(all, "\n") + "\n"
		}
		if code := cmd.ProcessState.ExitCode(); code != want || !strings.Contains(errText, "node delegate: the child ended aborted: cancelled while the agent was starting") || !strings.HasSuffix(errText, "node: interrupted\n") {
			t.Fatalf("json %v: exit %d (%v), stderr %q", asJSON, code, err, errText)
		}
		last := all[len(all)-1]
		switch {
		case asJSON && (!strings.Contains(last, `"type":"node/result"`) || !strings.Contains(last, `"stopReason":"aborted"`)):
			t.Fatalf("last line %q, want the result", last)
		case !asJSON && !slices.ContainsFunc(all, regexp.MustCompile(`^child \S{12} ended: aborted in \S+$`).MatchString):
			t.Fatalf("no end line of the child in %q", all)
		}
		stdout, _, code := nodeEnv(t, t.TempDir(), withData(data), "sessions")
		if listed := parseListing(t, stdout); code != 0 || len(listed) != 1 || listed[0].state != "aborted" {
			t.Fatalf("sessions:\n%s", stdout)
		}
	}
}

// Contract N1: what delegate cannot start with exits 2 (a usage or
// config-file error, said plainly) or 1 (an agent that does not start, a
// file that cannot be read), before any child runs.
func TestN1_DelegateBadInputExits(t *testing.T) {
	fake := fakeServer(t)
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no config", []string{"hi"}, exitUsage, "-config FILE is required"},
		{"no prompt", []string{"-config", fakeConfig(t)}, exitUsage, "no prompt: give the child's task after the flags"},
		{"unknown flag", []string{"-bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{"unreadable file", []string{"-config", missing, "hi"}, exitFailed, "node delegate: -config: open " + missing},
		{"not JSON", []string{"-config", writeConfig(t, `agent_servers: {}`), "hi"}, exitUsage, "acp: invalid config: not valid JSON at byte 0"},
		{"unknown top-level key", []string{"-config", writeConfig(t, `{"agent_servers": {}, "servers": {}}`), "hi"}, exitUsage, `unknown key "servers"`},
		{"unknown server key", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"command": "x", "cwd": "/"}}}`), "hi"}, exitUsage, `acp: invalid config: unknown key "cwd" at /agent_servers/a`},
		{"no command", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"args": []}}}`), "hi"}, exitUsage, "command is required"},
		{"relative dir", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"command": "x", "dir": "src"}}}`), "hi"}, exitUsage, `dir "src" is not absolute`},
		{"bad permissions", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"command": "x", "permissions": "some"}}}`), "hi"}, exitUsage, `"permissions" "some" is not`},
		{"no servers", []string{"-config", writeConfig(t, `{"agent_servers": {}}`), "hi"}, exitUsage, "no agent servers"},
		{"unknown provider", []string{"-config", fakeConfig(t), "-provider", "nope", "hi"}, exitUsage, `-provider "nope" is no agent server of`},
		{"two servers, no provider", []string{"-config", writeConfig(t, `{"agent_servers": {"a": `+fake+`, "b": `+fake+`}}`), "hi"}, exitUsage, "has 2 agent servers: name one with -provider (configured: a, b)"},
		{"missing -dir", []string{"-config", fakeConfig(t), "-dir", filepath.Join(missing, "d"), "hi"}, exitFailed, "cannot use directory"},
		{"agent that does not exist", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"command": "/nonexistent/agent"}}}`), "hi"}, exitFailed, "acp: agent did not start: launch"},
		{"agent that exits at once", []string{"-config", writeConfig(t, `{"agent_servers": {"a": {"command": "sh", "args": ["-c", "echo no model >&2; exit 3"]}}}`), "hi"}, exitFailed, "(agent exit status 3); stderr: no model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := node(t, t.TempDir(), append([]string{"delegate"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, c.code, c.msg)
			}
			if c.code == exitUsage && stdout != "" {
				t.Errorf("stdout %q before anything ran", stdout)
			}
		})
	}
}

// Contract N1: delegate in process, under the race detector: the progress
// and output, and nothing left running when cli returns.
func TestN1_InProcessDelegateDisposesEverything(t *testing.T) {
	t.Setenv(envDataDir, memoryData)
	config := fakeConfig(t)
	before := goleak.IgnoreCurrent()
	var stdout, stderr bytes.Buffer
	if code := cli(testkit.Ctx(t), []string{"delegate", "-config", config, "-dir", t.TempDir(), "in process"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if err := goleak.Find(before, testkit.DeadLetters); err != nil {
		t.Fatalf("cli left goroutines behind: %v", err)
	}
	if !strings.HasSuffix(stdout.String(), "\n\necho: in process\n") || !completedLine.MatchString(stderr.String()) {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// Contract N1: each agent server's delegate tool is named after it, unless
// that name is taken or is no valid tool name.
func TestN1_AgentToolNames(t *testing.T) {
	taken := []string{"list", "read", "count", "subagent"}
	got, err := agentToolNames([]string{"claude code", "fake", "list", "subagent", "subagent_x", "x"}, taken)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"claude code": "subagent_claude_code", "fake": "fake", "list": "subagent_list", "subagent": "subagent_subagent", "subagent_x": "subagent_x", "x": "x"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	if _, err := agentToolNames([]string{"list", "subagent_list"}, taken); err == nil || !strings.Contains(err.Error(), `agent server "list" would be offered as tool "subagent_list", which is agent server "subagent_list"`) {
		t.Fatalf("clash: %v", err)
	}
	if _, err := agentToolNames([]string{strings.Repeat("é", 60)}, taken); err == nil || !strings.Contains(err.Error(), "longer than 64") {
		t.Fatalf("long name: %v", err)
	}
}

// Contracts P3, N1: with -config, run gives the top agent a delegate tool
// per agent server beside its subagent tool (named after the server, or
// subagent_<name> when a file tool has the name); the model calls two at
// once, each child is an ACP agent working in the surveyed directory, its
// progress shows and its output is the tool's answer. Its session is the
// top session's child.
func TestP3_RunDelegatesToConfiguredAgentServers(t *testing.T) {
	fake := fakeServer(t)
	config := writeConfig(t, `{"agent_servers": {"fake": `+fake+`, "list": `+fake+`}}`)
	calls := openaitest.Calls(
		openaitest.ToolCall{ID: "call_1", Name: "fake", Args: `{"description": "ask fake", "prompt": "one"}`},
		openaitest.ToolCall{ID: "call_2", Name: "subagent_list", Args: `{"description": "ask list", "prompt": "two"}`},
	)
	srv := openaitest.NewServer(t, calls, openaitest.Reply("Both agents answered."))
	data := t.TempDir()
	env := append(withData(data), envBaseURL+"="+srv.URL, envAPIKey+"=sk", envModel+"=m")
	stdout, stderr, code := nodeEnv(t, writeTree(t), env, "run", "-config", config)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	id, answer := cutSession(t, stdout)
	progress, _ := cutUsage(t, stderr)
	if answer != "\nBoth agents answered.\n" {
		t.Fatalf("answer %q; stdout:\n%s", answer, stdout)
	}
	if n := len(completedLine.FindAllString(progress, -1)); n != 2 || len(fakeToolLine.FindAllString(progress, -1)) != 2 {
		t.Fatalf("want two ACP children completed, progress:\n%s", progress)
	}
	reqs := srv.WaitFinished(t, 2)
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	slices.Sort(offered)
	if want := []string{"count", "fake", "list", "read", "subagent", "subagent_list"}; !slices.Equal(offered, want) {
		t.Fatalf("tools offered %q, want %q", offered, want)
	}
	var answers []string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			var a struct{ Output string }
			if err := json.Unmarshal([]byte(m.Text()), &a); err != nil {
				t.Fatalf("tool answer %q: %v", m.Text(), err)
			}
			answers = append(answers, a.Output)
		}
	}
	slices.Sort(answers)
	if !slices.Equal(answers, []string{"echo: one", "echo: two"}) {
		t.Fatalf("tool answers %q", answers)
	}
	stdout, _, _ = nodeEnv(t, t.TempDir(), withData(data), "sessions", id)
	if listed := parseListing(t, stdout); len(listed) != 3 || listed[1].depth != 1 || listed[2].depth != 1 {
		t.Fatalf("sessions %s:\n%s", id, stdout)
	}
}

// Contract N1: run refuses a -config file it cannot use with exit 2
// before anything runs.
func TestN1_RunBadConfigExitsTwo(t *testing.T) {
	fake := fakeServer(t)
	for _, c := range []struct{ config, msg string }{
		{`{"agent_servers": {"a": {"command": "x", "cwd": "/"}}}`, `unknown key "cwd"`},
		{`{"agent_servers": {"spawn": ` + fake + `}}`, `agent server "spawn" has the name of the node's own provider`},
		{`{"agent_servers": {"list": ` + fake + `, "subagent_list": ` + fake + `}}`, `would be offered as tool "subagent_list"`},
	} {
		stdout, stderr, code := node(t, writeTree(t), "run", "-config", writeConfig(t, c.config))
		if code != exitUsage || !strings.Contains(stderr, "node run: ") || !strings.Contains(stderr, c.msg) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.config, code, stdout, stderr, c.msg)
		}
	}
}

// Contract P3 against a real third-party agent, end to end: node delegate
// runs the ACP Go SDK's example agent as a subprocess: its tool calls and
// its permission request (rejected by the default read-only policy) show
// as progress, its output is printed, exit 0.
func TestP3_DelegateExampleAgentEndToEnd(t *testing.T) {
	t.Parallel()
	agent := acptest.ExampleAgent(t)
	config := writeConfig(t, fmt.Sprintf(`{"agent_servers": {"example": {"command": %q}}}`, agent))
	began := time.Now()
	stdout, stderr, code := node(t, t.TempDir(), "delegate", "-config", config, "-provider", "example", "Please improve the project")
	t.Logf("node delegate on the example agent: %s", time.Since(began))
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	_, output := cutSession(t, stdout)
	output, progress := strings.TrimPrefix(output, "\n"), stderr
	if !strings.HasPrefix(output, "ACP Go Example Agent") || !strings.Contains(output, "I understand you prefer not to make that change") {
		t.Fatalf("output %q", output)
	}
	for _, want := range []string{"started", "step 1 tool Reading project files", "step 1 tool Modifying critical configuration file",
		"step 1 permission rejected: Modifying critical configuration file"} {
		if !regexp.MustCompile(`(?m)^child \S{12} \[[^\]]*\] ` + regexp.QuoteMeta(want) + `$`).MatchString(progress) {
			t.Errorf("no progress line %q in:\n%s", want, progress)
		}
	}
	if !completedLine.MatchString(progress) {
		t.Errorf("no end line in:\n%s", progress)
	}
}

const qwenInstall = "npm install -g @qwen-code/qwen-code@0.24.4"

// qwenConfig is a configuration file whose one agent server, qwen, is
// qwen-code (at path qwen) with a home of its own, on srv as its model.
// It skips the test where qwen-code is not installed, and fails it in CI.
func qwenConfig(t *testing.T, srv *openaitest.Server) (qwen, config string) {
	t.Helper()
	qwen, err := exec.LookPath("qwen")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("qwen-code is not installed: %s", qwenInstall)
		}
		t.Skipf("qwen-code is not installed (%s)", qwenInstall)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	// No background memory extraction: every model request is the turn's.
	if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(`{"memory":{"enableManagedAutoMemory":false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	entry, _ := json.Marshal(map[string]any{
		"command": qwen, "args": []string{"--acp"},
		"env": map[string]string{"HOME": home, "OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": "any", "OPENAI_MODEL": "openaitest"},
	})
	return qwen, writeConfig(t, `{"agent_servers": {"qwen": `+string(entry)+`}}`)
}

// copyBinary copies the node binary to dir under name, as `go build -o
// dir/name ./cmd/node` would have made it.
func copyBinary(t *testing.T, dir, name string) string {
	t.Helper()
	src, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, name)
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Contracts P3, N1: the binary's name. qwen-code, installed by npm, starts
// through "#!/usr/bin/env node". Built as subactor, first on PATH, the node
// delegates to it and the child completes: env found Node.js. The same
// binary named node first on PATH (what `go install ./cmd/node` and a Go
// bin directory before Node.js's make) is what env finds instead: it warns
// before starting the agent, the agent fails to start, and the message
// that comes back from it says why and what to do. Help and errors use the
// name the program was invoked by.
func TestP3_NpmAgentStartsFromANodeBuiltUnderAnotherName(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Reply("Hello from the model."), openaitest.Reply("spare"), openaitest.Reply("spare"))
	qwen, config := qwenConfig(t, srv)
	goBin, shadowing := t.TempDir(), t.TempDir()
	subactor := copyBinary(t, goBin, "subactor")
	shadow := copyBinary(t, shadowing, "node")
	run := func(exe, pathFirst string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(nodeCtx(t), exe, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), withData(t.TempDir())[0], "PATH="+pathFirst+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Fatalf("%s %q: %v", exe, args, err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}

	began := time.Now()
	stdout, stderr, code := run(subactor, goBin, "delegate", "-config", config, "Say hello.")
	t.Logf("subactor delegate on qwen: %s", time.Since(began))
	if code != 0 || !strings.HasSuffix(stdout, "\n\nHello from the model.\n") || strings.Contains(stderr, "warning") {
		t.Fatalf("built as subactor: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, _, code = run(subactor, goBin, "help", "delegate")
	if code != 0 || !strings.HasPrefix(stdout, "usage: subactor delegate -config FILE") || !strings.Contains(stdout, "-provider NAME") {
		t.Fatalf("help: exit %d, stdout %q", code, stdout)
	}
	if _, stderr, code = run(subactor, goBin, "delegate", "hi"); code != exitUsage || !strings.HasPrefix(stderr, "subactor delegate: -config FILE is required") {
		t.Fatalf("usage error: exit %d, stderr %q", code, stderr)
	}

	stdout, stderr, code = run(shadow, shadowing, "delegate", "-config", config, "Say hello.")
	for _, want := range []string{
		"node delegate: warning: " + shadow + ", the first node on PATH, is this program, not Node.js",
		"node delegate: acp: agent did not start",
		fmt.Sprintf(`stderr: node: %q is a script, not a command: this is subactor's node binary, not Node.js`, qwen),
		"put Node.js's directory before " + shadowing + " on PATH",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("shadowing Node.js: stderr lacks %q", want)
		}
	}
	if code != exitFailed || strings.Contains(stdout, "started") {
		t.Fatalf("shadowing Node.js: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Contract N1: started as Node.js (named node, a script where a command
// goes), the node says what it is instead of "unknown command"; under
// another name a file is just an unknown command.
func TestN1_NodeRunInNodeJSPlaceSaysSo(t *testing.T) {
	script := filepath.Join(t.TempDir(), "cli.js")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env node\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := node(t, t.TempDir(), script, "--acp")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("node: %q is a script, not a command: this is subactor's node binary, not Node.js", script)) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	cmd := exec.CommandContext(testkit.Ctx(t), copyBinary(t, t.TempDir(), "subactor"), script)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitUsage || !strings.HasPrefix(string(out), fmt.Sprintf("subactor: unknown command %q", script)) {
		t.Fatalf("as subactor: %v, %s", err, out)
	}
}
