package acp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract P3: one prompt turn. Message chunks become the output; chunks,
// thoughts, tool calls (by title), plans and the final text become the
// run's progress events, in order, under the run's id; usage is kept.
func TestP3_TurnMapsUpdatesToOutputAndProgress(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	p := newProvider(t, fakeConfig(t, sys, modeNormal))
	r := startScoped(t, testkit.Ctx(t), rec, p, request(
		"say Hello",
		"think pondering",
		"tool t1 read Read the file",
		"done t1",
		"tool t2 execute Run the tests",
		"fail t2",
		"plan",
		"say , world",
		"usage",
	))
	res := wait(t, r)
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "Hello, world" {
		t.Fatalf("result %+v", res)
	}
	if res.Usage == nil || *res.Usage != (subagent.Usage{InputTokens: 11, OutputTokens: 7, CachedInputTokens: 3}) {
		t.Fatalf("usage %+v", res.Usage)
	}
	type ev struct {
		kind    subagent.ProgressKind
		text    string
		isError bool
	}
	want := []ev{
		{subagent.TextDelta, "Hello", false},
		{acpdata.ThoughtText, "pondering", false},
		{subagent.ToolCallStarted, "Read the file", false},
		{subagent.ToolCallFinished, "Read the file", false},
		{subagent.ToolCallStarted, "Run the tests", false},
		{subagent.ToolCallFinished, "Run the tests", true},
		{acpdata.PlanUpdated, "[completed] look\n[pending] answer", false},
		{subagent.TextDelta, ", world", false},
		{subagent.MessageText, "Hello, world", false},
	}
	var got []ev
	for _, e := range rec.all() {
		if e.RunID != r.ID() || e.Step != 1 {
			t.Fatalf("event %+v: want run %s, step 1", e, r.ID())
		}
		got = append(got, ev{e.Kind, e.Text, e.IsError})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n got %+v\nwant %+v", got, want)
	}
}

// Contract P3: stop reasons map end_turn→completed, cancelled→aborted,
// max_tokens→max-tokens, refusal→refusal, anything else→error with the
// agent's words kept in Detail.
func TestP3_StopReasonsMapOntoOurs(t *testing.T) {
	sys := newSystem(t)
	p := newProvider(t, fakeConfig(t, sys, modeNormal))
	for _, c := range []struct {
		script string
		want   subagent.StopReason
		detail string
	}{
		{"stop end_turn", subagent.Completed, ""},
		{"stop cancelled", subagent.Aborted, "cancelled its turn"},
		{"stop max_tokens", subagent.MaxTokens, "token limit"},
		{"stop refusal", subagent.Refusal, "refused"},
		{"stop max_turn_requests", subagent.Error, "max_turn_requests"},
		{"stop gave_up_politely", subagent.Error, `"gave_up_politely"`},
		{"error the model is on fire", subagent.Error, "the model is on fire"},
	} {
		t.Run(c.script, func(t *testing.T) {
			t.Parallel()
			res := wait(t, start(t, testkit.Ctx(t), p, request("say partial", c.script)))
			if res.StopReason != c.want || !strings.Contains(res.Detail, c.detail) {
				t.Fatalf("%s: got %s %q, want %s with %q", c.script, res.StopReason, res.Detail, c.want, c.detail)
			}
			if subagent.TextOf(res.Output) != "partial" {
				t.Fatalf("output %+v", res.Output)
			}
		})
	}
	t.Run("json-rpc error keeps its code", func(t *testing.T) {
		res := wait(t, start(t, testkit.Ctx(t), p, request("error boom")))
		if !strings.Contains(res.Detail, "-32042") || !strings.Contains(res.Detail, "scripted") {
			t.Fatalf("detail %q", res.Detail)
		}
	})
}

// Contract P3: no start-time capability, no inherited context (P5), and a
// request using a capability is refused before any process starts.
func TestP3_DeclaresNoCapabilities(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	p := newProvider(t, cfg)
	if p.Capabilities() != (subagent.Capabilities{}) || p.InheritsParentContext() || p.Name() != acp.DefaultName {
		t.Fatalf("capabilities %+v, inherits %v, name %q", p.Capabilities(), p.InheritsParentContext(), p.Name())
	}
	persona := "a pirate"
	depth := 2
	for _, req := range []subagent.StartRequest{
		{Persona: &persona}, {MaxDepth: &depth}, {ToolFilter: &subagent.ToolFilter{Allow: []string{"x"}}},
		{OutputSchema: []byte(`{"type":"object"}`)},
	} {
		req.Prompt, req.Parent = []subagent.ContentBlock{subagent.Text("say x")}, top
		if _, err := p.Start(testkit.Ctx(t), subagent.Scope{}, req); !errors.Is(err, subagent.ErrUnsupported) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if _, err := p.Start(testkit.Ctx(t), subagent.Scope{}, subagent.StartRequest{Parent: top}); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Fatalf("empty prompt: %v", err)
	}
	if n := starts(t, cfg); n != 0 {
		t.Fatalf("%d agents started for refused requests", n)
	}
}

// Contract P3: the working directory is checked before any process
// starts; a usable one is the agent's, and without one the node's is.
func TestP3_WorkingDirectory(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{
		"missing":     filepath.Join(t.TempDir(), "missing"),
		"not a dir":   file,
		"no entering": "",
	}
	if os.Geteuid() != 0 { // root enters any directory
		locked := filepath.Join(t.TempDir(), "locked")
		if err := os.Mkdir(locked, 0o600); err != nil {
			t.Fatal(err)
		}
		dirs["no entering"] = locked
	}
	for name, dir := range dirs {
		if dir == "" {
			continue
		}
		c := cfg
		c.Dir = dir
		_, err := newProvider(t, c).Start(testkit.Ctx(t), subagent.Scope{}, request("say x"))
		var de *acp.DirError
		if !errors.As(err, &de) || !errors.Is(err, acp.ErrDir) || de.Dir != dir {
			t.Fatalf("%s: %v", name, err)
		}
	}
	c := cfg
	c.Dir = "relative/dir"
	if _, err := acp.New(c); !errors.Is(err, acp.ErrConfig) {
		t.Fatalf("relative dir: %v", err)
	}
	if n := starts(t, cfg); n != 0 {
		t.Fatalf("%d agents started in unusable directories", n)
	}

	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request("cwd")))
	if want := "cwd:" + cfg.Dir + ";"; subagent.TextOf(res.Output) != want {
		t.Fatalf("configured dir: %q, want %q", subagent.TextOf(res.Output), want)
	}
	c = cfg
	c.Dir = ""
	wd, _ := os.Getwd()
	res = wait(t, start(t, testkit.Ctx(t), newProvider(t, c), request("cwd")))
	if want := "cwd:" + wd + ";"; subagent.TextOf(res.Output) != want {
		t.Fatalf("node's dir: %q, want %q", subagent.TextOf(res.Output), want)
	}
}

// Contract P3: the child does not inherit the node's credential-like
// variables; the configured ones always pass.
func TestP3_EnvironmentWithholdsCredentials(t *testing.T) {
	t.Setenv("ACPTEST_SERVICE_API_KEY", "leaked")
	t.Setenv("ACPTEST_session_token", "leaked")
	t.Setenv("ACPTEST_DB_PASSWORD", "leaked")
	t.Setenv("ACPTEST_PLAIN", "plain")
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.Env["ACPTEST_GIVEN_TOKEN"] = "given"
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request(
		"env ACPTEST_SERVICE_API_KEY", "env ACPTEST_session_token", "env ACPTEST_DB_PASSWORD",
		"env ACPTEST_PLAIN", "env ACPTEST_GIVEN_TOKEN")))
	want := "env:ACPTEST_SERVICE_API_KEY=<unset>;env:ACPTEST_session_token=<unset>;env:ACPTEST_DB_PASSWORD=<unset>;" +
		"env:ACPTEST_PLAIN=plain;env:ACPTEST_GIVEN_TOKEN=given;"
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("env\n got %s\nwant %s", got, want)
	}
	for name, want := range map[string]bool{"OPENAI_API_KEY": true, "GH_TOKEN": true, "aws_secret_access_key": true, "PATH": false, "HOME": false} {
		if acp.IsCredentialName(name) != want {
			t.Errorf("IsCredentialName(%q) = %v", name, !want)
		}
	}
}

// Contract P3: permission requests are answered by the policy: by
// default read-only kinds are allowed and the rest rejected, a request
// offering no option for the decision is answered cancelled, and the
// answer is a one-time option.
func TestP3_PermissionRequestsFollowThePolicy(t *testing.T) {
	sys := newSystem(t)
	script := []string{
		"ask read Look at a file", "ask search Grep", "ask think Think", "ask fetch Fetch",
		"ask edit Change a file", "ask execute Run a command", "ask  No kind",
		"ask-noallow read Read without allow", "ask-noreject edit Edit without reject",
	}
	rec := newRecorder()
	res := wait(t, startScoped(t, testkit.Ctx(t), rec, newProvider(t, fakeConfig(t, sys, modeNormal)), request(script...)))
	want := "perm:selected:allow-once;perm:selected:allow-once;perm:selected:allow-once;perm:selected:allow-once;" +
		"perm:selected:reject-once;perm:selected:reject-once;perm:selected:reject-once;" +
		"perm:cancelled;perm:cancelled;"
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("read-only policy\n got %s\nwant %s", got, want)
	}
	var answers []string
	for _, ev := range rec.all() {
		if ev.Kind == acpdata.PermissionAnswered {
			answers = append(answers, ev.Text)
		}
	}
	if len(answers) != len(script) || answers[0] != "allowed: Look at a file" || answers[4] != "rejected: Change a file" || answers[7] != "cancelled: Read without allow" {
		t.Fatalf("permission events %q", answers)
	}

	cfg := fakeConfig(t, sys, modeNormal)
	var (
		mu   sync.Mutex
		seen []acp.ToolCall
	)
	cfg.Permissions = func(_ context.Context, c acp.ToolCall) bool {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
		return true
	}
	res = wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request("ask edit Change a file", "ask-noallow read R")))
	if got := subagent.TextOf(res.Output); got != "perm:selected:allow-once;perm:cancelled;" {
		t.Fatalf("allowing policy: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].RunID == "" || seen[1].RunID != seen[0].RunID {
		t.Fatalf("policy saw %+v, without the run's id", seen)
	}
	if seen[0].RunID = ""; seen[0] != (acp.ToolCall{ID: "perm-call", Title: "Change a file", Kind: "edit"}) {
		t.Fatalf("policy saw %+v", seen)
	}
}

// Contract P3 (and X1: an editor serves its children's files): with the
// relay hooks, file requests are served by them instead of the disk, with
// the run's id and the absolute path, still confined to the working
// directory (a path outside never reaches the relay); a relay's error is
// the agent's error answer.
func TestP3_X1_RelayServesFileRequestsInsideTheWorkingDirectory(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.ReadFiles, cfg.WriteFiles = true, true
	dir, outside := cfg.Dir, t.TempDir()
	var (
		mu    sync.Mutex
		files = map[string]string{filepath.Join(dir, "a.txt"): "buffer\nof the editor\n"}
		runs  = map[string]bool{}
	)
	cfg.RelayRead = func(_ context.Context, runID, path string, line, limit *int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		runs[runID] = true
		text, ok := files[path]
		if !ok {
			return "", errors.New("no such buffer")
		}
		if line != nil && limit != nil {
			return fmt.Sprintf("%d+%d:%s", *line, *limit, text), nil
		}
		return text, nil
	}
	cfg.RelayWrite = func(_ context.Context, runID, path, content string) error {
		mu.Lock()
		defer mu.Unlock()
		runs[runID] = true
		files[path] = content
		return nil
	}
	in := func(p string) string { return filepath.Join(dir, p) }
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request(
		"read "+in("a.txt"),
		"readl "+in("a.txt")+" 2 1",
		"read "+in("none.txt"),
		"read "+filepath.Join(outside, "secret"),
		"write "+in("b.txt")+" written",
		"write "+dir+"/../pwned x",
		"read "+in("b.txt"),
	)))
	want := "read:buffer\nof the editor\n;read:2+1:buffer\nof the editor\n;read-error:-32602;read-error:-32602;" +
		"write:ok;write:-32602;read:written;"
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("relayed files\n got %q\nwant %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 1 || runs[""] {
		t.Fatalf("the relay saw runs %v, want the one run's id", runs)
	}
	if _, err := os.Stat(in("b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a relayed write reached the disk: %v", err)
	}
	for p := range files {
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("the relay saw %s, outside %s", p, dir)
		}
	}
}

// Contract P3: fs/read_text_file and fs/write_text_file are served inside
// the working directory only: no "..", no path outside, no symlink out.
func TestP3_FilesServedOnlyInsideTheWorkingDirectory(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.ReadFiles, cfg.WriteFiles = true, true
	dir := cfg.Dir
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(dir, "escape")))
	must(t, os.Symlink("a.txt", filepath.Join(dir, "inlink")))
	in := func(p string) string { return filepath.Join(dir, p) }
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request(
		"read "+in("a.txt"),
		"readl "+in("a.txt")+" 2 1",
		"read "+in("inlink"),
		"read "+dir+"/sub/../a.txt",
		"read "+filepath.Join(outside, "secret"),
		"read "+in("escape/secret"),
		"read sub/../a.txt",
		"write "+in("new/deep/b.txt")+" written",
		"write "+in("escape/pwned")+" x",
		"write "+dir+"/../pwned x",
	)))
	want := "read:one\ntwo\nthree\n;read:two\n;read:one\ntwo\nthree\n;" +
		"read-error:-32602;read-error:-32602;read-error:-32602;read-error:-32602;" +
		"write:ok;write:-32602;write:-32602;"
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("files\n got %q\nwant %q", got, want)
	}
	if b, err := os.ReadFile(in("new/deep/b.txt")); err != nil || string(b) != "written" {
		t.Fatalf("written file: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(outside, "pwned"), filepath.Join(filepath.Dir(dir), "pwned")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was written: %v", p, err)
		}
	}
}

// Contract P3: without the file flags, file requests are refused, and any
// other agent-to-client method (terminals, extensions) is method-not-found.
func TestP3_OtherRequestsAreMethodNotFound(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	must(t, os.WriteFile(filepath.Join(cfg.Dir, "a.txt"), []byte("one"), 0o644))
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request(
		"read "+filepath.Join(cfg.Dir, "a.txt"), "write "+filepath.Join(cfg.Dir, "b.txt")+" x", "terminal", "ext")))
	want := "read-error:-32601;write:-32601;terminal:-32601;ext:-32601;"
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Contract R4: ACP has no mid-turn injection, so an ACP run is no
// Steerer.
func TestR4_ACPRunOffersNoSteer(t *testing.T) {
	sys := newSystem(t)
	r := start(t, testkit.Ctx(t), newProvider(t, fakeConfig(t, sys, modeNormal)), request("say x"))
	if _, ok := any(r).(subagent.Steerer); ok {
		t.Fatal("an ACP run offers Steer")
	}
	if r.LocalAgent() != nil {
		t.Fatal("an ACP run has a local agent")
	}
	wait(t, r)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
