package delegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/internal/testkit"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/internal/testkit/agenttest"
	"github.com/subactor/subactor/internal/testkit/delegatetest"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// countingStore counts the sessions created through it.
type countingStore struct {
	persistence.Store
	mu      sync.Mutex
	created int
}

func (s *countingStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	seq, err := s.Store.CreateWith(ctx, h, recs...)
	if err != nil {
		return seq, err
	}
	s.mu.Lock()
	s.created++
	s.mu.Unlock()
	return seq, nil
}

func (s *countingStore) creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

// env is a real actor system and Service over one store.
type env struct {
	sys   *actors.System
	svc   *registry.Service
	store *countingStore
}

func newEnv(t testing.TB) *env {
	t.Helper()
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	return &env{sys: sys, svc: svc, store: &countingStore{Store: persistence.NewMemory()}}
}

func (e *env) register(t testing.TB, p subagent.Provider) (release func()) {
	t.Helper()
	release, err := e.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return release
}

// spawnProvider registers a spawn provider (scripted model by default).
func (e *env) spawnProvider(t *testing.T, cfg spawn.Config) {
	t.Helper()
	cfg.System, cfg.Store = e.sys, e.store
	if cfg.Model == nil {
		cfg.Model = scripted.New()
	}
	p, err := spawn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.register(t, p)
}

// agentAt creates an agent in the env's store.
func (e *env) agentAt(t testing.TB, id string, depth int, opts subagent.AgentOptions, model agent.Model, tools ...agent.Tool) *agent.Agent {
	t.Helper()
	if model == nil {
		model = scripted.New()
	}
	a, err := agent.New(t.Context(), agent.Config{
		Store: e.store, Model: model, Tools: tools, Options: opts,
		Header: subagent.SessionHeader{SessionID: id, DelegationDepth: depth},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// events subscribes to the start and end events of the parent's children. It also
// spawns the parent actor, so actor counts taken afterwards are stable.
func (e *env) events(t *testing.T, parent *agent.Agent) <-chan subagent.Event {
	t.Helper()
	ch := make(chan subagent.Event, 64)
	t.Cleanup(e.svc.ListenParent(parent.SessionID(), func(ev subagent.Event) error { ch <- ev; return nil },
		registry.OnlyEvents(subagent.TypeOf(subagent.RunStarted{}), subagent.TypeOf(subagent.RunEnded{}))).Release)
	return ch
}

// newTool returns a delegate tool over provider that has handled the
// provider's registration (which must already be done) or its absence.
func newTool(t *testing.T, svc *registry.Service, cfg delegate.Config, registered bool) *delegate.Tool {
	t.Helper()
	f := delegatetest.Follow(svc)
	cfg.Service = f
	tool := delegate.New(cfg)
	t.Cleanup(tool.Close)
	if registered {
		f.Await(t, subagent.ProviderAdded{Provider: cfg.Provider})
	}
	return tool
}

// stub is a provider with chosen capabilities that never starts a child and
// counts the attempts.
type stub struct {
	name   string
	caps   subagent.Capabilities
	starts chan struct{}
}

func newStub(name string, caps subagent.Capabilities) *stub {
	return &stub{name: name, caps: caps, starts: make(chan struct{}, 64)}
}

func (s *stub) Name() string                        { return s.name }
func (s *stub) Capabilities() subagent.Capabilities { return s.caps }
func (s *stub) InheritsParentContext() bool         { return false }
func (s *stub) Start(context.Context, subagent.Scope, subagent.StartRequest) (subagent.Run, error) {
	s.starts <- struct{}{}
	return nil, errors.New("stub: starts no child")
}

func text(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

func final(s string) agent.Response { return agent.Response{Message: agent.Message{Content: text(s)}} }

func callTool(name, args string) agent.Response {
	return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: "c1", Name: name, Args: json.RawMessage(args)}}}}
}

// toolResult is the result of call c1 in req.
func toolResult(t *testing.T, req agent.Request) agent.Message {
	t.Helper()
	for _, m := range req.Messages {
		if m.Role == agent.ToolRole && m.ToolCallID == "c1" {
			return m
		}
	}
	t.Fatalf("no tool result in the request")
	return agent.Message{}
}

// offers reports whether req offered the delegate tool.
func offers(req agent.Request) bool {
	return slices.ContainsFunc(req.Tools, func(s agent.ToolSpec) bool { return s.Name == delegate.DefaultName })
}

type params struct {
	Type                 string                     `json:"type"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	AdditionalProperties *bool                      `json:"additionalProperties"`
}

// checkSpec checks the tool's spec: a compilable object schema whose
// properties are exactly want, description and prompt required, nothing else
// allowed.
func checkSpec(t *testing.T, tool *delegate.Tool, want ...string) {
	t.Helper()
	spec := tool.Spec()
	if spec.Name != delegate.DefaultName {
		t.Fatalf("tool name %q", spec.Name)
	}
	if _, err := schema.CompileObject(spec.Parameters); err != nil {
		t.Fatalf("parameters are not an object schema: %v\n%s", err, spec.Parameters)
	}
	var p params
	if err := json.Unmarshal(spec.Parameters, &p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range p.Properties {
		got = append(got, name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Equal(p.Required, []string{"description", "prompt"}) ||
		p.AdditionalProperties == nil || *p.AdditionalProperties {
		t.Fatalf("parameters %s: properties %v, want %v", spec.Parameters, got, want)
	}
}

var base = []string{"description", "prompt"}

// Contract T1.
func TestT1_SchemaShowsOnlyWhatTheProviderSupports(t *testing.T) {
	e := newEnv(t)
	for i, c := range []struct {
		caps  subagent.Capabilities
		extra []string
	}{
		{subagent.Capabilities{}, nil},
		{subagent.Capabilities{OutputSchema: true, Persona: true}, []string{"output_schema", "persona"}},
		{subagent.Capabilities{DepthLimit: true, ToolFilter: true}, []string{"delegation_levels", "tools"}},
		{subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, []string{"output_schema", "delegation_levels", "tools", "persona"}},
	} {
		name := fmt.Sprint("stub-", i)
		e.register(t, newStub(name, c.caps))
		tool := newTool(t, e.svc, delegate.Config{Provider: name}, true)
		checkSpec(t, tool, append(slices.Clone(base), c.extra...)...)
	}
	// A provider that is not registered shows the bare parameters.
	checkSpec(t, newTool(t, e.svc, delegate.Config{Provider: "absent"}, false), base...)
}

// Contract T1.
func TestT1_ForegroundAnswerFromARealParent(t *testing.T) {
	e := newEnv(t)
	e.spawnProvider(t, spawn.Config{})
	tool := newTool(t, e.svc, delegate.Config{Provider: spawn.DefaultName}, true)
	var live []int // actor counts at each parent step
	parentModel := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		live = append(live, testkit.LiveActors(e.sys))
		if len(req.Messages) == 1 {
			return callTool(delegate.DefaultName, `{"description":"d","prompt":"echo hello"}`)
		}
		return final("ok")
	})
	parent := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, parentModel, tool)
	events := e.events(t, parent)

	if res := parent.Run(testkit.Ctx(t), text("delegate"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("parent: %+v", res)
	}
	reqs := parentModel.Requests("delegate")
	if len(reqs) != 2 || !offers(reqs[0]) {
		t.Fatalf("parent made %d requests; delegate offered: %v", len(reqs), len(reqs) > 0 && offers(reqs[0]))
	}
	res := toolResult(t, reqs[1])
	var answer map[string]any
	if res.IsError || json.Unmarshal([]byte(subagent.TextOf(res.Content)), &answer) != nil {
		t.Fatalf("tool result %+v", res)
	}
	runID, _ := answer["runId"].(string)
	if want := map[string]any{"kind": "foreground", "runId": runID, "sessionId": runID, "output": "hello"}; !reflect.DeepEqual(answer, want) {
		t.Fatalf("answer %v, want %v", answer, want)
	}
	// The run id is a fresh child's session id, a child of the parent's.
	if h, _, err := e.store.Load(t.Context(), runID); err != nil || h.ParentSessionID != "parent" || h.DelegationDepth != 1 {
		t.Fatalf("child session %q: %+v, %v", runID, h, err)
	}
	// The child was disposed before the tool answered.
	if live[0] != live[1] {
		t.Fatalf("live actors %d before the call, %d after it", live[0], live[1])
	}
	started := testkit.Recv(t, events, "the start event").(subagent.RunStarted)
	ended := testkit.Recv(t, events, "the end event").(subagent.RunEnded)
	// One run, one id: the tool's answer and the events agree.
	if started.RunID != runID || started.SessionID != runID || !started.Local || ended.RunID != runID || ended.StopReason != subagent.Completed {
		t.Fatalf("events %+v %+v", started, ended)
	}
}

// Contract T1.
func TestT1_NonCompletedChildIsAnError(t *testing.T) {
	e := newEnv(t)
	child := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		if subagent.TextOf(req.Messages[0].Content) == "refuse" {
			return agent.Response{Message: agent.Message{Content: text("I will not")}, StopReason: subagent.Refusal}
		}
		return final("not json")
	})
	e.spawnProvider(t, spawn.Config{Model: child})
	tool := newTool(t, e.svc, delegate.Config{Provider: spawn.DefaultName}, true)
	parentModel := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		if len(req.Messages) == 1 {
			return callTool(delegate.DefaultName, `{"description":"d","prompt":"refuse"}`)
		}
		return final("ok")
	})
	parent := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, parentModel, tool)
	e.events(t, parent)

	for args, want := range map[string][]string{
		`{"description":"d","prompt":"refuse"}`:                                   {"refusal", "I will not"},
		`{"description":"d","prompt":"schema","output_schema":{"type":"object"}}`: {"error", "not JSON"},
	} {
		live := testkit.LiveActors(e.sys)
		out, err := tool.Call(testkit.Ctx(t), parent, json.RawMessage(args))
		if err == nil || out != "" {
			t.Fatalf("%s: got %q, %v; want an error", args, out, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", args, err, w)
			}
		}
		if got := testkit.LiveActors(e.sys); got != live {
			t.Fatalf("%s: live actors %d, want %d: the child was not disposed", args, got, live)
		}
	}

	// The agent loop turns the error into an error tool result.
	if res := parent.Run(testkit.Ctx(t), text("delegate"), nil); res.StopReason != subagent.Completed {
		t.Fatalf("parent: %+v", res)
	}
	reqs := parentModel.Requests("delegate")
	if res := toolResult(t, reqs[len(reqs)-1]); !res.IsError || !strings.Contains(subagent.TextOf(res.Content), "refusal") {
		t.Fatalf("tool result %+v, want an error naming the stop reason", res)
	}
}

// Contract E4.
func TestE4_ToolsFollowRegistrationWhateverTheOrder(t *testing.T) {
	e := newEnv(t)
	caller := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, nil)
	all := []string{"description", "prompt", "output_schema", "delegation_levels", "tools", "persona"}
	p := newStub("late", subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true})

	early := delegatetest.Follow(e.svc)
	before := delegate.New(delegate.Config{Service: early, Provider: "late"})
	t.Cleanup(before.Close)
	if before.Available(caller) {
		t.Fatal("available before its provider is registered")
	}
	if _, err := before.Call(testkit.Ctx(t), caller, json.RawMessage(`{"description":"d","prompt":"p"}`)); !errors.Is(err, subagent.ErrNoProvider) {
		t.Fatalf("Call without provider: %v", err)
	}
	release := e.register(t, p)
	early.Await(t, subagent.ProviderAdded{Provider: "late"})
	late := delegatetest.Follow(e.svc)
	after := delegate.New(delegate.Config{Service: late, Provider: "late"})
	t.Cleanup(after.Close)
	late.Await(t, subagent.ProviderAdded{Provider: "late"})

	for name, tool := range map[string]*delegate.Tool{"created before": before, "created after": after} {
		if !tool.Available(caller) {
			t.Fatalf("tool %s registration: not available", name)
		}
		checkSpec(t, tool, all...)
	}

	release()
	early.Await(t, subagent.ProviderRemoved{Name: "late"})
	late.Await(t, subagent.ProviderRemoved{Name: "late"})
	for name, tool := range map[string]*delegate.Tool{"created before": before, "created after": after} {
		if tool.Available(caller) {
			t.Fatalf("tool %s registration: still available after release", name)
		}
		checkSpec(t, tool, base...)
	}
	if len(p.starts) != 0 {
		t.Fatal("the stub was asked to start")
	}
}

// Contract K3.
func TestK3_HostileArgumentsStartNoChild(t *testing.T) {
	e := newEnv(t)
	e.spawnProvider(t, spawn.Config{})
	bare := newStub("bare", subagent.Capabilities{})
	e.register(t, bare)
	full := newTool(t, e.svc, delegate.Config{Provider: spawn.DefaultName}, true)
	limited := newTool(t, e.svc, delegate.Config{Provider: "bare"}, true)
	parent := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, nil)
	events := e.events(t, parent)
	live, created := testkit.LiveActors(e.sys), e.store.creates()

	for _, c := range []struct {
		tool *delegate.Tool
		args string
		want error
	}{
		{full, `{"description":"d","prompt":"echo x","extra":1}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":5}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x"}}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x"} {}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x"} garbage`, delegate.ErrArgs},
		{full, `{"description":"d"}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":""}`, delegate.ErrArgs},
		{full, `"echo x"`, delegate.ErrArgs},
		{full, `null`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x","delegation_levels":"deep"}`, delegate.ErrArgs},
		// The parameter's old name is gone: an unknown field.
		{full, `{"description":"d","prompt":"echo x","max_depth":1}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x","tools":{"allow":["list"],"only":[]}}`, delegate.ErrArgs},
		{full, `{"description":"d","prompt":"echo x","output_schema":{"type":"string"}}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","output_schema":[{"type":"object"}]}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","output_schema":{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","tools":{}}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","tools":{"allow":["list"],"deny":["list"]}}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","persona":"  "}`, subagent.ErrInvalidRequest},
		{full, `{"description":"d","prompt":"echo x","delegation_levels":-1}`, delegate.ErrArgs},
		{full, `{"prompt":"echo x"}`, delegate.ErrArgs},
		{full, `{"description":" ","prompt":"echo x"}`, delegate.ErrArgs},
		{limited, `{"description":"d","prompt":"echo x","persona":"p"}`, delegate.ErrArgs},
		{limited, `{"description":"d","prompt":"echo x","output_schema":{"type":"object"}}`, delegate.ErrArgs},
		{limited, `{"description":"d","prompt":"echo x","delegation_levels":1}`, delegate.ErrArgs},
		{limited, `{"description":"d","prompt":"echo x","tools":{"deny":["list"]}}`, delegate.ErrArgs},
	} {
		out, err := c.tool.Call(testkit.Ctx(t), parent, json.RawMessage(c.args))
		if !errors.Is(err, c.want) || out != "" {
			t.Errorf("%s: got %q, %v; want %v", c.args, out, err, c.want)
		}
	}
	if len(bare.starts) != 0 || testkit.LiveActors(e.sys) != live || e.store.creates() != created {
		t.Fatalf("a hostile call reached a provider: stub starts %d, live actors %d→%d, sessions %d→%d",
			len(bare.starts), live, testkit.LiveActors(e.sys), created, e.store.creates())
	}
	// The parent actor emits in order: the first start it reports is the
	// valid call's, so no hostile call published a run.
	out, err := full.Call(testkit.Ctx(t), parent, json.RawMessage(`{"description":"d","prompt":"echo fine"}`))
	if err != nil {
		t.Fatal(err)
	}
	var answer delegate.Answer
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatal(err)
	}
	if ev, ok := testkit.Recv(t, events, "the first start event").(subagent.RunStarted); !ok || ev.RunID != answer.RunID {
		t.Fatalf("first event %+v, want the start of run %s", ev, answer.RunID)
	}
}

// Contract D6: delegation_levels counts from the child; Config.MaxDepth is
// the absolute cap from the top-level agent, which the argument only
// tightens.
func TestD6_DelegationLevelsArgumentTightensTheCap(t *testing.T) {
	e := newEnv(t)
	child := agenttest.NewRecorder(func(agent.Request) agent.Response { return final("done") })
	f := delegatetest.Follow(e.svc)
	tool := delegate.New(delegate.Config{Service: f, Provider: spawn.DefaultName}) // cap 3
	t.Cleanup(tool.Close)
	e.spawnProvider(t, spawn.Config{Model: child, Tools: []agent.Tool{tool}})
	f.Await(t, subagent.ProviderAdded{Provider: spawn.DefaultName})
	one := 1
	top := e.agentAt(t, "top", 0, subagent.AgentOptions{}, nil)
	capped := e.agentAt(t, "capped", 0, subagent.AgentOptions{MaxDepth: &one}, nil)

	for _, c := range []struct {
		caller  *agent.Agent
		task    string
		extra   string
		offered bool // whether the child at depth 1 may delegate
	}{
		{top, "default cap", "", true},
		{top, "no further", `,"delegation_levels":0`, false},
		{top, "one more", `,"delegation_levels":1`, true},
		// A huge count neither overflows nor loosens the tool's cap.
		{top, "huge", `,"delegation_levels":9223372036854775807`, true},
		// The argument never loosens a cap the caller inherited.
		{capped, "loosen", `,"delegation_levels":5`, false},
	} {
		args := fmt.Sprintf(`{"description":"d","prompt":%q%s}`, c.task, c.extra)
		if _, err := tool.Call(testkit.Ctx(t), c.caller, json.RawMessage(args)); err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		reqs := child.Requests(c.task)
		if len(reqs) == 0 || offers(reqs[0]) != c.offered {
			t.Fatalf("%s: child offered the delegate tool: %v, want %v", args, len(reqs) > 0 && offers(reqs[0]), c.offered)
		}
	}
}

// TestE4_AToolMadeBeforeItsProviderIsAvailableOnceRegistered: a provider
// that lists the delegate tool among its children's tools is registered
// after the tool exists; the tool must offer itself as soon as
// RegisterProvider has returned, whether or not its event has arrived.
func TestE4_AToolMadeBeforeItsProviderIsAvailableOnceRegistered(t *testing.T) {
	e := newEnv(t)
	caller := e.agentAt(t, "parent", 0, subagent.AgentOptions{}, nil)
	for i := range 20 {
		name := fmt.Sprint("p", i)
		tool := delegate.New(delegate.Config{Service: e.svc, Provider: name})
		release := e.register(t, newStub(name, subagent.Capabilities{Persona: true}))
		if !tool.Available(caller) {
			t.Fatalf("round %d: not available right after registration", i)
		}
		checkSpec(t, tool, "description", "persona", "prompt")
		release()
		tool.Close()
	}
}

// FuzzK3_ArgumentsNeverPanicAndStartOnlyValidChildren feeds arbitrary bytes
// as the model's arguments: the tool answers with an error, or hands the
// provider a request the Service validated; it never panics.
func FuzzK3_ArgumentsNeverPanicAndStartOnlyValidChildren(f *testing.F) {
	for _, seed := range []string{
		`{"description":"d","prompt":"p"}`,
		`{"description":"d","prompt":"p","output_schema":{"type":"object"},"delegation_levels":1,"tools":{"allow":["x"]},"persona":"q"}`,
		`{"description":"d","prompt":"p","delegation_levels":-3}`,
		`{"description":"d","prompt":"p"}}`,
		`[]`, `null`, ``, `{"prompt":7}`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	e := newEnv(f)
	all := newStub("all", subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true})
	e.register(f, all)
	tool := delegate.New(delegate.Config{Service: e.svc, Provider: "all"})
	f.Cleanup(tool.Close)
	caller := e.agentAt(f, "parent", 0, subagent.AgentOptions{}, nil)
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := tool.Call(testkit.Ctx(t), caller, args)
		if err == nil || out != "" {
			// The stub starts no child, so every call must end in an error.
			t.Fatalf("Call(%q) = %q, %v", args, out, err)
		}
		select {
		case <-all.starts:
			// Reaching the provider means the arguments made a valid request.
			if !json.Valid(args) {
				t.Fatalf("invalid JSON %q reached the provider", args)
			}
		default:
		}
	})
}
