package scripted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dustin/go-humanize"
	"github.com/dustin/go-humanize/english"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// project writes a small tree with nested folders, an empty folder, files
// with and without a final newline, an empty file and a symlink (which the
// tally skips).
func project(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"README.md":          "hello world\n",
		"main.go":            "package main\n\nfunc main() {}\n",
		"a/x.go":             "package a\n",
		"a/y.txt":            "no newline at end",
		"a/sub/z.txt":        "one\ntwo\nthree\n",
		"a/sub/deeper/w.txt": "",
		"c/deep/er/f.txt":    "x y z\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../README.md", filepath.Join(root, "a", "link")); err != nil {
		t.Skipf("symlinks unsupported: %v", err)
	}
	return root
}

type figures struct{ files, lines, bytes, folders int }

func (f figures) String() string {
	return fmt.Sprintf("%s, %s, %s", english.Plural(f.files, "file", ""), english.Plural(f.lines, "line", ""), humanize.IBytes(uint64(f.bytes)))
}

// walk computes the figures of the regular files under root/rel (all of
// them, or only those directly in it) and the folders it walked, root/rel
// included, the plain way, without the tools.
func walk(t *testing.T, root, rel string, recursive bool) figures {
	t.Helper()
	var f figures
	base := filepath.Join(root, filepath.FromSlash(rel))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != base && !recursive {
			return filepath.SkipDir
		}
		if d.IsDir() {
			f.folders++
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.files++
		f.bytes += len(data)
		f.lines += bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			f.lines++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func prompt(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

type env struct {
	root   string
	store  persistence.Store
	tools  []agent.Tool
	schema json.RawMessage
	steer  agent.SteerSource
	onStep func(agent.Step)
}

func (e env) agent(t *testing.T) *agent.Agent {
	t.Helper()
	tools, err := fstools.New(e.root, fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := e.store
	if store == nil {
		store = persistence.NewMemory()
	}
	a, err := agent.New(t.Context(), agent.Config{
		Store:        store,
		Header:       subagent.SessionHeader{SessionID: "top"},
		Model:        scripted.New(),
		Tools:        append(tools, e.tools...),
		OutputSchema: e.schema,
		OnStep:       e.onStep,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (e env) run(t *testing.T, task string) subagent.Result {
	t.Helper()
	return e.agent(t).Run(testkit.Ctx(t), prompt(task), e.steer)
}

func wantCompleted(t *testing.T, res subagent.Result) {
	t.Helper()
	if res.StopReason != subagent.Completed {
		t.Fatalf("stop reason %q: %s (output %q)", res.StopReason, res.Detail, subagent.TextOf(res.Output))
	}
}

func tallyJSON(dir string, f figures) string {
	return fmt.Sprintf(`{"path":%q,"files":%d,"lines":%d,"bytes":%d,"folders":%d}`, dir, f.files, f.lines, f.bytes, f.folders)
}

func TestTallyMatchesAnIndependentWalk(t *testing.T) {
	root := project(t)
	for _, dir := range []string{".", "a", "a/sub", "b", "c"} {
		t.Run(dir, func(t *testing.T) {
			res := env{root: root, schema: scripted.TallySchema}.run(t, "tally "+dir)
			wantCompleted(t, res)
			want := tallyJSON(dir, walk(t, root, dir, true))
			if string(res.Structured) != want || subagent.TextOf(res.Output) != want {
				t.Fatalf("got %s, want %s", res.Structured, want)
			}
		})
	}
}

func TestTallyOfAMissingFolderFailsTheSchema(t *testing.T) {
	res := env{root: project(t), schema: scripted.TallySchema}.run(t, "tally nope")
	if res.StopReason != subagent.Error || !strings.HasPrefix(subagent.TextOf(res.Output), "tally nope: failed: list: ") {
		t.Fatalf("got %q %q", res.StopReason, subagent.TextOf(res.Output))
	}
}

// delegate is a stand-in for the delegate tool: it runs each "tally" as a
// nested agent with the scripted model, as the spawn provider would.
type delegate struct {
	root       string
	store      persistence.Store
	withSchema bool              // offer output_schema, like a provider that supports it
	fail       map[string]string // prompt → error

	mu      sync.Mutex
	prompts []string
}

func (d *delegate) Spec() agent.ToolSpec {
	params := `{"type":"object","properties":{"description":{"type":"string"},"prompt":{"type":"string"}}}`
	if d.withSchema {
		params = `{"type":"object","properties":{"description":{"type":"string"},"prompt":{"type":"string"},"output_schema":{"type":"object"}}}`
	}
	return agent.ToolSpec{Name: "subagent", Description: "delegate a task", Parameters: json.RawMessage(params)}
}

func (d *delegate) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	var args struct {
		Description  string          `json:"description"`
		Prompt       string          `json:"prompt"`
		OutputSchema json.RawMessage `json:"output_schema"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return "", err
	}
	if d.withSchema != (args.OutputSchema != nil) {
		return "", fmt.Errorf("output_schema offered: %v, sent: %s", d.withSchema, args.OutputSchema)
	}
	if dir, _ := strings.CutPrefix(args.Prompt, "tally "); args.Description != "tally "+path.Base(dir) {
		return "", fmt.Errorf("description %q is not the short form of prompt %q", args.Description, args.Prompt)
	}
	d.mu.Lock()
	d.prompts = append(d.prompts, args.Prompt)
	d.mu.Unlock()
	if msg, ok := d.fail[args.Prompt]; ok {
		return "", errors.New(msg)
	}
	tools, err := fstools.New(d.root, fstools.Options{})
	if err != nil {
		return "", err
	}
	child, err := agent.New(ctx, agent.Config{
		Store: d.store,
		Header: subagent.SessionHeader{
			SessionID:       caller.SessionID() + "/" + args.Prompt,
			ParentSessionID: caller.SessionID(),
			DelegationDepth: caller.Header().DelegationDepth + 1,
		},
		Model:        scripted.New(),
		Tools:        tools,
		OutputSchema: args.OutputSchema,
	})
	if err != nil {
		return "", err
	}
	res := child.Run(ctx, prompt(args.Prompt), nil)
	if res.StopReason != subagent.Completed {
		return "", fmt.Errorf("subagent stopped: %s\n%s", res.StopReason, res.Detail)
	}
	out, err := json.Marshal(map[string]any{
		"kind": "foreground", "runId": "run-" + args.Prompt,
		"output": subagent.TextOf(res.Output), "structured": res.Structured,
	})
	return string(out), err
}

// surveyReport is the expected survey answer for the project tree, built
// from the independent walk.
func surveyReport(t *testing.T, root string, delegated bool, failed map[string]string) string {
	t.Helper()
	top := walk(t, root, ".", false)
	total := top
	folders, k := 1, 0
	var lines, failures []string
	for _, d := range []string{"a", "b", "c"} {
		if msg, ok := failed[d]; ok {
			failures = append(failures, fmt.Sprintf("- %s: failed: %s", d, msg))
			continue
		}
		f := walk(t, root, d, true)
		total = figures{total.files + f.files, total.lines + f.lines, total.bytes + f.bytes, 0}
		folders += f.folders // every folder of the tree, not only the top ones
		if delegated {
			k++
		}
		lines = append(lines, fmt.Sprintf("- %s: %s", d, f))
	}
	lines = append(lines, "- (top level): "+top.String())
	head := fmt.Sprintf("survey .: %s in %s (%d delegated)", total, english.Plural(folders, "folder", ""), k)
	return strings.Join(append(append([]string{head}, lines...), failures...), "\n")
}

func TestSurveyDelegatesEachFolder(t *testing.T) {
	for _, withSchema := range []bool{true, false} {
		t.Run(fmt.Sprintf("output_schema=%v", withSchema), func(t *testing.T) {
			root := project(t)
			store := persistence.NewMemory()
			d := &delegate{root: root, store: store, withSchema: withSchema}
			a := env{root: root, store: store, tools: []agent.Tool{d}}.agent(t)
			res := a.Run(testkit.Ctx(t), prompt("survey ."), nil)
			wantCompleted(t, res)
			if got, want := subagent.TextOf(res.Output), surveyReport(t, root, true, nil); got != want {
				t.Fatalf("report\n got %s\nwant %s", got, want)
			}
			// Step 2 is one response: a delegation per folder, in name
			// order, and one count of the top level's files (a count of
			// the directory itself).
			var step2 []string
			for _, c := range a.Turns()[3].ToolCalls {
				var args struct{ Path, Prompt string }
				if err := json.Unmarshal(c.Args, &args); err != nil {
					t.Fatal(err)
				}
				step2 = append(step2, fmt.Sprintf("%s %s %s%s", c.ID, c.Name, args.Path, args.Prompt))
			}
			want := []string{"call-2-0 subagent tally a", "call-2-1 subagent tally b", "call-2-2 subagent tally c", "call-2-3 count ."}
			if !reflect.DeepEqual(step2, want) {
				t.Fatalf("step 2 calls\n got %q\nwant %q", step2, want)
			}
		})
	}
}

// Without the delegate tool (a child at its depth cap) the survey walks the
// folders itself and reaches the same figures.
func TestSurveyWithoutDelegateToolWalksItself(t *testing.T) {
	root := project(t)
	res := env{root: root}.run(t, "survey .")
	wantCompleted(t, res)
	if got, want := subagent.TextOf(res.Output), surveyReport(t, root, false, nil); got != want {
		t.Fatalf("report\n got %s\nwant %s", got, want)
	}
}

func TestSurveyReportsFailedFolders(t *testing.T) {
	root := project(t)
	store := persistence.NewMemory()
	d := &delegate{root: root, store: store, withSchema: true, fail: map[string]string{"tally b": "boom\nstack trace"}}
	res := env{root: root, store: store, tools: []agent.Tool{d}}.run(t, "survey .")
	wantCompleted(t, res)
	if got, want := subagent.TextOf(res.Output), surveyReport(t, root, true, map[string]string{"b": "boom"}); got != want {
		t.Fatalf("report\n got %s\nwant %s", got, want)
	}
}

func TestSurveyOfAMissingFolder(t *testing.T) {
	res := env{root: project(t)}.run(t, "survey nope")
	wantCompleted(t, res)
	if got := subagent.TextOf(res.Output); !strings.HasPrefix(got, "survey nope: failed: list: ") {
		t.Fatalf("got %q", got)
	}
}

// steerOnce admits one message into the first request.
type steerOnce struct{ msgs [][]subagent.ContentBlock }

func (s *steerOnce) Take(context.Context) ([][]subagent.ContentBlock, error) {
	m := s.msgs
	s.msgs = nil
	return m, nil
}

func TestSteersAreNoted(t *testing.T) {
	root := project(t)
	steer := func() agent.SteerSource {
		return &steerOnce{msgs: [][]subagent.ContentBlock{prompt("skip vendor"), prompt("be quick\nplease")}}
	}
	res := env{root: root, schema: scripted.TallySchema, steer: steer()}.run(t, "tally c")
	wantCompleted(t, res)
	want := strings.TrimSuffix(tallyJSON("c", walk(t, root, "c", true)), "}") + `,"noted":["skip vendor","be quick\nplease"]}`
	if string(res.Structured) != want {
		t.Fatalf("got %s, want %s", res.Structured, want)
	}

	res = env{root: root, steer: steer()}.run(t, "survey .")
	wantCompleted(t, res)
	if got, want := subagent.TextOf(res.Output), surveyReport(t, root, false, nil)+"\nnoted: skip vendor\nnoted: be quick please"; got != want {
		t.Fatalf("report\n got %s\nwant %s", got, want)
	}
}

// The model is a pure function of the request, so a history resumed from
// the store continues where the interrupted run stopped.
func TestResumedTallyFinishes(t *testing.T) {
	root := project(t)
	store := persistence.NewMemory()
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	a := env{root: root, store: store, schema: scripted.TallySchema, onStep: func(s agent.Step) {
		if s.Kind == subagent.ModelCallStarted && s.N == 3 {
			cancel() // the third model call sees an ended context
		}
	}}.agent(t)
	if res := a.Run(ctx, prompt("tally a"), nil); res.StopReason != subagent.Aborted {
		t.Fatalf("first run: %q %s", res.StopReason, res.Detail)
	}
	tools, err := fstools.New(root, fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := agent.New(t.Context(), agent.Config{
		Store: store, Header: subagent.SessionHeader{SessionID: "top"}, Resume: true,
		Model: scripted.New(), Tools: tools, OutputSchema: scripted.TallySchema,
	})
	if err != nil {
		t.Fatal(err)
	}
	res := b.Run(testkit.Ctx(t), prompt("go on"), nil)
	wantCompleted(t, res)
	want := strings.TrimSuffix(tallyJSON("a", walk(t, root, "a", true)), "}") + `,"noted":["go on"]}`
	if string(res.Structured) != want {
		t.Fatalf("got %s, want %s", res.Structured, want)
	}
}

func generate(t *testing.T, req agent.Request) agent.Response {
	t.Helper()
	resp, err := scripted.New().Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func user(s string) agent.Message { return agent.Message{Role: agent.User, Content: prompt(s)} }

func TestEchoAndUnknownTasks(t *testing.T) {
	for task, want := range map[string]string{
		"echo hello\nworld": "hello\nworld",
		"echo":              "",
		"dance now\nplease": `scripted model: unknown task "dance now"`,
		"":                  `scripted model: unknown task ""`,
	} {
		resp := generate(t, agent.Request{Messages: []agent.Message{user(task)}})
		if got := subagent.TextOf(resp.Message.Content); got != want || resp.StopReason != subagent.Completed || len(resp.Message.ToolCalls) != 0 {
			t.Errorf("%q: got %q %q", task, got, resp.StopReason)
		}
	}
}

func TestMaxTokensTruncatesTheAnswer(t *testing.T) {
	// 9 bytes of answer, 8 allowed: the cut falls inside the last é, which
	// is dropped whole.
	req := agent.Request{Messages: []agent.Message{user("echo aéééé")}, MaxTokens: 2}
	resp := generate(t, req)
	if got := subagent.TextOf(resp.Message.Content); got != "aééé" || resp.StopReason != subagent.MaxTokens {
		t.Fatalf("got %q %q", got, resp.StopReason)
	}
	req.MaxTokens = 3
	if resp := generate(t, req); resp.StopReason != subagent.Completed || subagent.TextOf(resp.Message.Content) != "aéééé" {
		t.Fatalf("within budget: %+v", resp)
	}
}

func TestDeterministic(t *testing.T) {
	// A listing of today's list, and one a session stored before list
	// had pages (a bare array), read alike.
	for _, listed := range []string{
		`{"entries":[{"name":"z.go","type":"file","size":3},{"name":"lib","type":"dir"},{"name":"l","type":"symlink"}]}`,
		`[{"name":"z.go","type":"file","size":3},{"name":"lib","type":"dir"},{"name":"l","type":"symlink"}]`,
	} {
		deterministic(t, listed)
	}
}

func deterministic(t *testing.T, listed string) {
	t.Helper()
	req := agent.Request{
		Messages: []agent.Message{
			user("tally src"),
			{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-1-0", Name: "list", Args: json.RawMessage(`{"path":"src"}`)}}},
			{Role: agent.ToolRole, ToolCallID: "call-1-0", Content: prompt(listed)},
		},
	}
	first := generate(t, req)
	for range 5 {
		if again := generate(t, req); !reflect.DeepEqual(again, first) {
			t.Fatalf("responses differ:\n%+v\n%+v", first, again)
		}
	}
	var calls []string
	for _, c := range first.Message.ToolCalls {
		calls = append(calls, c.ID+" "+c.Name+" "+string(c.Args))
	}
	// Breadth-first: the files of src are counted (one count of src
	// itself) in the same step as its sub-directories are listed; the
	// symlink is skipped.
	want := []string{`call-2-0 count {"path":"src"}`, `call-2-1 list {"path":"src/lib"}`}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	size := 0
	for _, m := range req.Messages {
		size += len(subagent.TextOf(m.Content))
		for _, c := range m.ToolCalls {
			size += len(c.Args)
		}
	}
	if first.Usage.InputTokens != size/4 || first.Usage.OutputTokens == 0 {
		t.Fatalf("usage %+v for %d request bytes", first.Usage, size)
	}
}

// A session stored before count took directories has a count of each
// file; a tally resumed from it adds those up instead of counting again.
func TestTallyAddsUpCountsOfEachFile(t *testing.T) {
	call := func(id, name, args string) agent.Message {
		return agent.Message{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: id, Name: name, Args: json.RawMessage(args)}}}
	}
	result := func(id, text string) agent.Message {
		return agent.Message{Role: agent.ToolRole, ToolCallID: id, Content: prompt(text)}
	}
	res := generate(t, agent.Request{Messages: []agent.Message{
		user("tally src"),
		call("call-1-0", "list", `{"path":"src"}`),
		result("call-1-0", `{"entries":[{"name":"a.go","type":"file","size":4},{"name":"b.go","type":"file","size":6}]}`),
		call("call-2-0", "count", `{"path":"src/a.go"}`),
		result("call-2-0", `{"path":"src/a.go","lines":1,"words":1,"bytes":4}`),
		call("call-2-1", "count", `{"path":"src/b.go"}`),
		result("call-2-1", `{"path":"src/b.go","lines":2,"words":2,"bytes":6}`),
	}})
	if got, want := subagent.TextOf(res.Message.Content), `{"path":"src","files":2,"lines":3,"bytes":10,"folders":1}`; len(res.Message.ToolCalls) > 0 || got != want {
		t.Fatalf("tally %s (calls %v), want %s", got, res.Message.ToolCalls, want)
	}
}

// A call left without a result (a hand-built or truncated history) counts
// as failed rather than being waited for forever.
func TestCallWithoutResultFails(t *testing.T) {
	resp := generate(t, agent.Request{Messages: []agent.Message{
		user("tally src"),
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-1-0", Name: "list", Args: json.RawMessage(`{"path":"src"}`)}}},
	}})
	if got := subagent.TextOf(resp.Message.Content); got != "tally src: failed: no result" {
		t.Fatalf("got %q", got)
	}
}

func TestTallySchemaIsValidJSON(t *testing.T) {
	var schema struct {
		Type     string   `json:"type"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(scripted.TallySchema, &schema); err != nil || schema.Type != "object" ||
		!reflect.DeepEqual(schema.Required, []string{"path", "files", "lines", "bytes", "folders"}) {
		t.Fatalf("schema %s: %v", scripted.TallySchema, err)
	}
}

// Contract K3 (item 9 of issue 18): what the tools cut short (a listing
// past its page, a count past its byte limit) leaves the figures partial,
// and the answer says so: a tally's "cut", then the survey's "- cut:"
// lines.
func TestK3_CutListingsAndCountsAreReported(t *testing.T) {
	tallyReq := agent.Request{Messages: []agent.Message{
		user("tally src"),
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-1-0", Name: "list", Args: json.RawMessage(`{"path":"src"}`)}}},
		{Role: agent.ToolRole, ToolCallID: "call-1-0", Content: prompt(`{"entries":[{"name":"big","type":"file","size":5000000000}],"truncated":true,"total":20000,"next":1}`)},
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-2-0", Name: "count", Args: json.RawMessage(`{"path":"src/big"}`)}}},
		{Role: agent.ToolRole, ToolCallID: "call-2-0", Content: prompt(`{"path":"src/big","lines":7,"words":9,"bytes":5000000000,"truncated":true,"counted":1073741824}`)},
	}}
	tally := subagent.TextOf(generate(t, tallyReq).Message.Content)
	want := `{"path":"src","files":1,"lines":7,"bytes":5000000000,"folders":1,"cut":["src: listed 1 of 20000 entries","src/big: lines counted in the first 1.0 GiB of 4.7 GiB"]}`
	if tally != want {
		t.Fatalf("tally\n got %s\nwant %s", tally, want)
	}
	surveyReq := agent.Request{
		Tools: []agent.ToolSpec{{Name: "subagent", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []agent.Message{
			user("survey ."),
			{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-1-0", Name: "list", Args: json.RawMessage(`{"path":"."}`)}}},
			{Role: agent.ToolRole, ToolCallID: "call-1-0", Content: prompt(`{"entries":[{"name":"src","type":"dir"}],"truncated":true,"total":3,"next":1}`)},
			{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-2-0", Name: "subagent", Args: json.RawMessage(`{"description":"tally src","prompt":"tally src"}`)}}},
			{Role: agent.ToolRole, ToolCallID: "call-2-0", Content: prompt(fmt.Sprintf(`{"output":%q}`, tally))},
		},
	}
	got := subagent.TextOf(generate(t, surveyReq).Message.Content)
	want = "survey .: 1 file, 7 lines, 4.7 GiB in 2 folders (1 delegated)\n" +
		"- src: 1 file, 7 lines, 4.7 GiB\n" +
		"- cut: .: listed 1 of 3 entries\n" +
		"- cut: src: listed 1 of 20000 entries\n" +
		"- cut: src/big: lines counted in the first 1.0 GiB of 4.7 GiB"
	if got != want {
		t.Fatalf("survey\n got %s\nwant %s", got, want)
	}
}

// The answer reads as a person writes it: singulars for one ("1 file, 1
// line", "1 folder") and sizes in binary units.
func TestSurveyAnswerSaysOneInTheSingularAndSizesHumanly(t *testing.T) {
	req := agent.Request{Messages: []agent.Message{
		user("survey ."),
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-1-0", Name: "list", Args: json.RawMessage(`{"path":"."}`)}}},
		{Role: agent.ToolRole, ToolCallID: "call-1-0", Content: prompt(`{"entries":[{"name":"a","type":"file","size":3000}]}`)},
		{Role: agent.Assistant, ToolCalls: []agent.ToolCall{{ID: "call-2-0", Name: "count", Args: json.RawMessage(`{"path":"."}`)}}},
		{Role: agent.ToolRole, ToolCallID: "call-2-0", Content: prompt(`{"path":".","files":1,"lines":1,"bytes":3000,"unreadable":1}`)},
	}}
	got := subagent.TextOf(generate(t, req).Message.Content)
	want := "survey .: 1 file, 1 line, 2.9 KiB in 1 folder (0 delegated)\n" +
		"- (top level): 1 file, 1 line, 2.9 KiB\n" +
		"- cut: .: 1 file unreadable"
	if got != want {
		t.Fatalf("survey\n got %q\nwant %q", got, want)
	}
}
