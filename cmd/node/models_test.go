package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

// delegation is the scripted conversation the node tests run against an
// OpenAI-compatible server: the top agent delegates two children in one
// turn, each child answers in streamed pieces, and the top agent answers.
// The children's requests may take steps 1 and 2 in either order (they run
// concurrently, F1); both reply alike, so the totals and lines do not
// depend on it.
type delegation struct {
	prompts []string // the children's prompts
	reply   string   // each child's answer
	answer  string   // the top agent's
	steps   []openaitest.Step
	total   subagent.Usage // everything the server hands out
}

func newDelegation() delegation {
	d := delegation{
		prompts: []string{"Count the files of alpha.", "Count the files of beta."},
		reply:   "counted: 3 files\nno more",
		answer:  "Both folders are counted: 6 files.",
	}
	var calls []openaitest.ToolCall
	for i, p := range d.prompts {
		args, _ := json.Marshal(map[string]string{"description": fmt.Sprintf("count folder %d", i+1), "prompt": p})
		calls = append(calls, openaitest.ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: "subagent", Args: string(args)})
	}
	usages := []openaitest.Usage{
		{PromptTokens: 110, CompletionTokens: 50},
		{PromptTokens: 70, CompletionTokens: 30, CachedTokens: 20},
		{PromptTokens: 80, CompletionTokens: 40},
		{PromptTokens: 200, CompletionTokens: 60, CachedTokens: 100},
	}
	top := openaitest.Calls(calls...)
	top.ChunkSize = 16
	child := openaitest.Reply(d.reply)
	child.ChunkSize = 4 // several text deltas
	final := openaitest.Reply(d.answer)
	d.steps = []openaitest.Step{top, child, child, final}
	for i := range d.steps {
		d.steps[i].Usage = &usages[i]
		d.total.Add(subagent.Usage{InputTokens: usages[i].PromptTokens, OutputTokens: usages[i].CompletionTokens, CachedInputTokens: usages[i].CachedTokens})
	}
	return d
}

// checkRequests checks that the server answered the whole script, every
// request for model with key, the top agent's first one on the survey
// prompt with the subagent tool, and one child request per prompt.
func (d delegation) checkRequests(t *testing.T, srv *openaitest.Server, model, key string) {
	t.Helper()
	reqs := srv.WaitFinished(t, len(d.steps))
	if n := srv.Remaining(); n != 0 {
		t.Fatalf("%d script steps left", n)
	}
	var childPrompts []string
	for i, r := range reqs {
		if r.Model != model || r.Authorization != "Bearer "+key || !r.Stream {
			t.Fatalf("request %d: model %q, authorization %q, stream %v; want %q, the key, streamed", i, r.Model, r.Authorization, r.Stream, model)
		}
		if i == 1 || i == 2 {
			last := r.Messages[len(r.Messages)-1]
			childPrompts = append(childPrompts, last.Text())
		}
	}
	first := reqs[0]
	var system, user string
	for _, m := range first.Messages {
		switch m.Role {
		case "system":
			system = m.Text()
		case "user":
			user = m.Text()
		}
	}
	if user != "survey ." || !strings.Contains(system, "subagent tool") {
		t.Fatalf("the top agent's request: system %q, user %q", system, user)
	}
	if !slices.ContainsFunc(first.Tools, func(tl openaitest.Tool) bool { return tl.Function.Name == "subagent" }) {
		t.Fatalf("the top agent was not offered the subagent tool: %+v", first.Tools)
	}
	slices.Sort(childPrompts)
	if !slices.Equal(childPrompts, d.prompts) {
		t.Fatalf("children asked %q, want %q", childPrompts, d.prompts)
	}
}

// noModelEnv clears the model environment a test case does not set.
var noModelEnv = []string{envBaseURL + "=", envAPIKey + "=", envModel + "=", envDeepSeekKey + "="}

// Contracts M1, U1, N1: node run end to end on an OpenAI-compatible server
// reached over loopback through OPENAI_BASE_URL, OPENAI_API_KEY and
// OPENAI_MODEL: the top agent delegates two children and answers; the
// progress lines keep their formats and the usage line totals what the
// server handed out, children's included.
func TestM1_RunOnOpenAICompatibleServerFromEnvironment(t *testing.T) {
	d := newDelegation()
	srv := openaitest.NewServer(t, d.steps...)
	env := append(withData(t.TempDir()), envBaseURL+"="+srv.URL, envAPIKey+"=sk-env", envModel+"=env-model")
	stdout, stderr, code := nodeEnv(t, writeTree(t), env, "run")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	_, answer := cutSession(t, stdout)
	progress, u := cutUsage(t, stderr)
	if u != d.total {
		t.Errorf("usage %+v, want the sum the server handed out %+v", u, d.total)
	}
	if answer != "\n"+d.answer+"\n" {
		t.Fatalf("answer %q, want %q; stdout:\n%s", answer, d.answer, stdout)
	}
	lines := map[string][]string{} // by child
	prompts := map[string]string{} // by child, its task from its start
	var top []string
	for _, line := range strings.Split(progress, "\n") {
		if topLine.MatchString(line) {
			top = append(top, line)
			continue
		}
		var m []string
		for _, re := range []*regexp.Regexp{startLine, stepLine, endLine} {
			if m = re.FindStringSubmatch(line); m != nil {
				break
			}
		}
		if m == nil {
			t.Fatalf("unexpected progress line %q", line)
		}
		if s := startLine.FindStringSubmatch(line); s != nil {
			prompts[m[1]] = s[2]
		}
		// Every line names the child by its task, as its start did.
		name := fmt.Sprintf("child %s [%s] ", m[1], prompts[m[1]])
		if !strings.HasPrefix(line, name) {
			t.Fatalf("line %q, want it named %q", line, name)
		}
		lines[m[1]] = append(lines[m[1]], strings.TrimPrefix(line, name))
	}
	if tasks := slices.Sorted(maps.Values(prompts)); len(lines) != 2 || !slices.Equal(tasks, d.prompts) {
		t.Fatalf("progress of %d children named %q, want 2 named by their prompts %q:\n%s", len(lines), tasks, d.prompts, progress)
	}
	// The top agent's steps: its two model calls, its two delegations
	// (run concurrently: in either order) and its answer.
	if len(top) == 5 {
		slices.Sort(top[1:3])
	}
	if want := []string{"top step 1 model", `top step 1 tool subagent {"description":"count folder 1","prompt":"Count the files of alpha."}`, `top step 1 tool subagent {"description":"count folder 2","prompt":"Count the files of beta."}`, "top step 2 model", "top step 2 final " + d.answer}; !slices.Equal(top, want) {
		t.Errorf("the top agent's lines %q, want %q", top, want)
	}
	for id, l := range lines {
		want := []string{"started", "step 1 model", "step 1 final counted: 3 files"}
		if len(l) != 4 || !slices.Equal(l[:3], want) || !strings.HasPrefix(l[3], "ended: completed in ") {
			t.Errorf("child %s: lines %q, want %q and its end", id, l, want)
		}
	}
	d.checkRequests(t, srv, "env-model", "sk-env")
}

// Contracts E6, M1: the top agent's own model calls are shown like a
// child's, a retried one too: with a real model, no silence while it
// thinks or waits on a busy endpoint.
func TestE6_RunShowsTheTopAgentsRetries(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Status(503, "0"), openaitest.Reply("nothing to delegate"))
	env := append(withData(t.TempDir()), envBaseURL+"="+srv.URL, envAPIKey+"=sk-env", envModel+"=env-model")
	_, stderr, code := nodeEnv(t, writeTree(t), env, "run")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	progress, _ := cutUsage(t, stderr)
	want := []string{"top step 1 model", "top step 1 retry attempt 1 failed, retrying in 0s: openai: 503 Service Unavailable: openaitest: status 503", "top step 1 final nothing to delegate"}
	if got := strings.Split(progress, "\n"); !slices.Equal(got, want) {
		t.Fatalf("progress %q, want %q", got, want)
	}
}

// Contracts E6, U1, M1: -json prints one JSON object per line: the
// session, every child's start, progress (streamed text included) and end
// in order, then the result with the answer and usage. -base-url and
// -model override OPENAI_BASE_URL and OPENAI_MODEL.
func TestE6_RunJSONLinesPerChildInOrder(t *testing.T) {
	d := newDelegation()
	srv := openaitest.NewServer(t, d.steps...)
	env := append(withData(t.TempDir()), envBaseURL+"=http://127.0.0.1:1/v1", envAPIKey+"=sk-json", envModel+"=not-this-one")
	stdout, stderr, code := nodeEnv(t, writeTree(t), env, "run", "-json", "-base-url", srv.URL, "-model", "flag-model")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	type record struct {
		jsonEvent
		Answer string `json:"answer"`
	}
	var recs []record
	for i, line := range lines {
		var r record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || r.Type == "" {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		recs = append(recs, r)
	}
	first, last := recs[0], recs[len(recs)-1]
	if first.Type != typeSession || len(first.SessionID) != 36 {
		t.Fatalf("first line %q, want the session", lines[0])
	}
	if last.Type != typeResult || last.SessionID != first.SessionID || last.StopReason != "completed" || last.Answer != d.answer || last.Usage == nil || *last.Usage != d.total {
		t.Fatalf("last line %q, want the result with answer %q and usage %+v", lines[len(lines)-1], d.answer, d.total)
	}
	type child struct {
		started, ended bool
		step           int
		kinds          []string
		text           string
		calls, usage   subagent.Usage
	}
	children := map[string]*child{}
	var topKinds []string
	var topCalls subagent.Usage
	for i, r := range recs[1 : len(recs)-1] {
		if r.RunID == first.SessionID {
			// The top agent's own steps, under its session's id.
			if r.Type != subagent.TypeOf(subagent.RunProgress{}) {
				t.Fatalf("line %d: %q, the top agent has only progress", i+2, lines[i+1])
			}
			topKinds = append(topKinds, r.Kind)
			if r.Usage != nil {
				topCalls.Add(*r.Usage)
			}
			continue
		}
		c := children[r.RunID]
		switch r.Type {
		case subagent.TypeOf(subagent.RunStarted{}):
			if c != nil || r.SessionID != r.RunID || r.Provider != "spawn" || !r.Local {
				t.Fatalf("line %d: start %q", i+2, lines[i+1])
			}
			children[r.RunID] = &child{started: true}
			continue
		case subagent.TypeOf(subagent.RunProgress{}):
			if c == nil || c.ended || r.Step < c.step {
				t.Fatalf("line %d: progress out of order %q", i+2, lines[i+1])
			}
			c.step = r.Step
			c.kinds = append(c.kinds, r.Kind)
			if r.Kind == string(subagent.TextDelta) {
				c.text += r.Text
			}
			if r.Kind == string(subagent.ModelCallFinished) && r.Usage != nil {
				c.calls.Add(*r.Usage)
			}
		case subagent.TypeOf(subagent.RunEnded{}):
			if c == nil || c.ended || r.StopReason != "completed" || r.Usage == nil {
				t.Fatalf("line %d: end %q", i+2, lines[i+1])
			}
			c.ended, c.usage = true, *r.Usage
		default:
			t.Fatalf("line %d: unexpected %q", i+2, lines[i+1])
		}
	}
	if len(children) != 2 {
		t.Fatalf("%d children, want 2:\n%s", len(children), stdout)
	}
	var sum subagent.Usage
	for id, c := range children {
		for _, k := range []subagent.ProgressKind{subagent.ModelCallStarted, subagent.TextDelta, subagent.ModelCallFinished, subagent.MessageText} {
			if !slices.Contains(c.kinds, string(k)) {
				t.Errorf("child %s: no %s among %q", id, k, c.kinds)
			}
		}
		if !c.ended || c.text != d.reply || c.usage != c.calls || c.usage.InputTokens == 0 {
			t.Errorf("child %s: ended %v, streamed %q, usage %+v (its calls %+v)", id, c.ended, c.text, c.usage, c.calls)
		}
		sum.Add(c.usage)
	}
	// The top agent's own calls are the first and last steps.
	top := d.total
	top.InputTokens -= sum.InputTokens
	top.OutputTokens -= sum.OutputTokens
	top.CachedInputTokens -= sum.CachedInputTokens
	if want := (subagent.Usage{InputTokens: 310, OutputTokens: 110, CachedInputTokens: 100}); top != want || topCalls != want {
		t.Errorf("the children's usage leaves %+v to the top agent, its own calls say %+v, want %+v", top, topCalls, want)
	}
	if !slices.Contains(topKinds, string(subagent.ModelCallStarted)) || !slices.Contains(topKinds, string(subagent.TextDelta)) || !slices.Contains(topKinds, string(subagent.MessageText)) {
		t.Errorf("the top agent's progress kinds %q, want its model calls, streamed text and answer", topKinds)
	}
	d.checkRequests(t, srv, "flag-model", "sk-json")
}

// writeModels writes a -models file.
func writeModels(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Contracts M1, D1: -models names several endpoints; the default one runs
// the top agent and its children, -model picks another of its models, the
// key comes from the variable apiKeyEnv names, the environment's endpoint
// is not used, and every child's descriptor records the endpoint and model.
func TestM1_ModelsFileNamesEndpoints(t *testing.T) {
	d := newDelegation()
	srv := openaitest.NewServer(t, d.steps...)
	file := writeModels(t, fmt.Sprintf(`{
		"endpoints": {
			"local": {"baseURL": %q, "model": "m-1", "models": ["m-1", "m-2"], "apiKeyEnv": "NODE_TEST_LOCAL_KEY"},
			"other": {"baseURL": "http://127.0.0.1:1/v1", "model": "x", "schemaMode": "json_object"}
		},
		"default": "local"
	}`, srv.URL))
	data := t.TempDir()
	env := append(withData(data), "NODE_TEST_LOCAL_KEY=sk-file", envBaseURL+"=http://127.0.0.1:1/v1", envAPIKey+"=sk-not-this")
	stdout, stderr, code := nodeEnv(t, writeTree(t), env, "run", "-quiet", "-models", file, "-model", "m-2")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	top, answer := cutSession(t, stdout)
	if answer != d.answer+"\n" {
		t.Fatalf("answer %q, want %q", answer, d.answer)
	}
	d.checkRequests(t, srv, "m-2", "sk-file")

	store := openData(t, data)
	children, err := store.Children(testkit.Ctx(t), top)
	if err != nil || len(children) != 2 {
		t.Fatalf("%d children: %v", len(children), err)
	}
	for _, c := range children {
		_, recs, err := store.Load(testkit.Ctx(t), c.Header.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := descriptor.Fold(recs)
		if err != nil || desc.AgentProvider != "local" || desc.AgentModel != "m-2" {
			t.Errorf("child %s descriptor %+v: %v; want endpoint local, model m-2", c.Header.SessionID, desc, err)
		}
	}
}

// Contract M1: a model configuration the node cannot use is refused before
// anything runs, with a message saying what is wrong: exit 2, nothing on
// stdout, no request made. A -models file that cannot be read is exit 1,
// like a directory that cannot be.
func TestM1_BadModelConfigurationExitsTwo(t *testing.T) {
	const good = `"local": {"baseURL": "http://127.0.0.1:1/v1", "model": "m-1", "models": ["m-1"]}`
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		msg  string
	}{
		{name: "unknown top-level key", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`}, "defualt": "local"}`)},
			msg: `unknown key "defualt" at the top level (keys are case-sensitive; top-level keys: endpoints, default; endpoint keys:`},
		{name: "key in the file", args: []string{"-models", writeModels(t, `{"endpoints": {"local": {"model": "m", "apiKey": "sk"}}}`)},
			msg: `unknown key "apiKey" at /endpoints/local (keys are case-sensitive; keys are read from the environment: name the variable with apiKeyEnv;`},
		{name: "unknown default endpoint", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`, "b": {"model": "x"}}, "default": "nope"}`)},
			msg: `default endpoint "nope" is not configured (configured: b, local)`},
		{name: "no default of two", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`, "b": {"model": "x"}}}`)},
			msg: `no "default": name the top agent's endpoint (configured: b, local)`},
		{name: "no endpoints", args: []string{"-models", writeModels(t, `{}`)}, msg: "no endpoints"},
		{name: "endpoint without a model", args: []string{"-models", writeModels(t, `{"endpoints": {"local": {"baseURL": "http://127.0.0.1:1/v1"}}}`)},
			msg: `endpoint "local": openai: no model configured`},
		{name: "bad schema mode", args: []string{"-models", writeModels(t, `{"endpoints": {"local": {"model": "m", "schemaMode": "xml"}}}`)},
			msg: `schemaMode "xml" is none of`},
		{name: "key variable unset", args: []string{"-models", writeModels(t, `{"endpoints": {"local": {"model": "m", "apiKeyEnv": "NODE_TEST_UNSET_KEY"}}}`)},
			msg: "its key variable NODE_TEST_UNSET_KEY (apiKeyEnv) is not set"},
		{name: "trailing data", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`}} {}`)}, msg: "not valid JSON at byte 98: invalid character '{' after top-level value"},
		{name: "not JSON", args: []string{"-models", writeModels(t, `endpoints: {}`)}, msg: "invalid character"},
		{name: "model not offered", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`}}`), "-model", "m-9"},
			msg: `-model m-9: endpoint "local" of`},
		{name: "base URL with a file", args: []string{"-models", writeModels(t, `{"endpoints": {`+good+`}}`), "-base-url", "http://127.0.0.1:1/v1"},
			msg: "-base-url cannot be used with -models"},
		{name: "empty file name", args: []string{"-models", ""}, msg: "-models needs a file"},
		{name: "model without an endpoint", args: []string{"-model", "gpt-x"}, msg: "-model gpt-x needs an endpoint"},
		{name: "base URL without a model", env: []string{envBaseURL + "=http://127.0.0.1:1/v1"},
			msg: "no model for http://127.0.0.1:1/v1: set OPENAI_MODEL or give -model"},
		{name: "bad base URL", args: []string{"-base-url", "ftp://example.com/v1", "-model", "m"}, msg: `-base-url "ftp://example.com/v1": `},
		{name: "unreadable file", args: []string{"-models", missing}, code: exitFailed, msg: "-models: open " + missing},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(append(withData(t.TempDir()), noModelEnv...), c.env...)
			stdout, stderr, code := nodeEnv(t, t.TempDir(), env, append([]string{"run"}, c.args...)...)
			want := cmp.Or(c.code, exitUsage)
			if code != want || stdout != "" || !strings.Contains(stderr, "node run: ") || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, want, c.msg)
			}
		})
	}
}

// Contract M1: the environment selects the model the ecosystem's way,
// flags taking the place of OPENAI_BASE_URL and OPENAI_MODEL; nothing set
// keeps the embedded scripted model. Nothing is contacted.
func TestM1_ModelFromEnvironmentAndFlags(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		o     options
		real  bool
		model string
	}{
		{name: "nothing set", real: false},
		{name: "DeepSeek key alone", env: map[string]string{envDeepSeekKey: "sk-ds"}, real: true, model: "deepseek-chat"},
		{name: "DeepSeek key and -model", env: map[string]string{envDeepSeekKey: "sk-ds"}, o: options{model: "deepseek-reasoner"}, real: true, model: "deepseek-reasoner"},
		{name: "OpenAI key alone", env: map[string]string{envAPIKey: "sk"}, real: true, model: "gpt-4o-mini"},
		{name: "OPENAI_MODEL", env: map[string]string{envAPIKey: "sk", envModel: "gpt-x"}, real: true, model: "gpt-x"},
		{name: "-model over OPENAI_MODEL", env: map[string]string{envAPIKey: "sk", envModel: "gpt-x"}, o: options{model: "gpt-y"}, real: true, model: "gpt-y"},
		{name: "-base-url alone", o: options{baseURL: "http://127.0.0.1:1/v1", model: "local"}, real: true, model: "local"},
		{name: "OpenAI before DeepSeek", env: map[string]string{envBaseURL: "http://127.0.0.1:1/v1", envModel: "m", envDeepSeekKey: "sk-ds"}, real: true, model: "m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := resolveModels(c.o, func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if m.real != c.real || m.endpoints != nil || m.endpoint != "" {
				t.Fatalf("real %v, endpoints %v %q; want real %v and no named endpoints", m.real, m.endpoints, m.endpoint, c.real)
			}
			if !c.real {
				if _, ok := m.top.(*openai.Client); ok {
					t.Fatal("an OpenAI client with nothing configured")
				}
				return
			}
			if cl, ok := m.top.(*openai.Client); !ok || cl.Model() != c.model {
				t.Fatalf("model %T %v, want an OpenAI client on %q", m.top, m.top, c.model)
			}
		})
	}
}
