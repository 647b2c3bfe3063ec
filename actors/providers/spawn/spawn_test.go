package spawn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/testkit/agenttest"
	"github.com/subactor/subactor/internal/testkit/delegatetest"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
	"github.com/subactor/subactor/tools/fstools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// spyStore records the sessions created through it and may run a hook
// after each successful CreateWith (how agents create their sessions).
type spyStore struct {
	persistence.Store
	mu       sync.Mutex
	created  []subagent.SessionHeader
	onCreate func(subagent.SessionHeader)
}

func (s *spyStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	seq, err := s.Store.CreateWith(ctx, h, recs...)
	if err != nil {
		return seq, err
	}
	s.mu.Lock()
	s.created = append(s.created, h)
	hook := s.onCreate
	s.mu.Unlock()
	if hook != nil {
		hook(h)
	}
	return seq, nil
}

func (s *spyStore) creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created)
}

// env is a real actor system and Service over one spy store.
type env struct {
	sys   *actors.System
	svc   *registry.Service
	store *spyStore
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	return &env{sys: sys, svc: svc, store: &spyStore{Store: persistence.NewMemory()}}
}

// register builds a spawn provider on the env (scripted model by default)
// and registers it.
func (e *env) register(t *testing.T, cfg spawn.Config) subagent.Provider {
	t.Helper()
	cfg.System, cfg.Store = e.sys, e.store
	if cfg.Model == nil {
		cfg.Model = scripted.New()
	}
	p, err := spawn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	release, err := e.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return p
}

// parent creates a delegating agent at depth in the env's store.
func (e *env) parent(t *testing.T, id string, depth int, opts subagent.AgentOptions) *agent.Agent {
	t.Helper()
	a, err := agent.New(t.Context(), agent.Config{
		Store:   e.store,
		Model:   scripted.New(),
		Header:  subagent.SessionHeader{SessionID: id, DelegationDepth: depth},
		Options: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// finish waits for run's result and disposes it.
func finish(t *testing.T, run subagent.Run) subagent.Result {
	t.Helper()
	res, err := run.Wait(testkit.Ctx(t))
	if derr := run.Dispose(testkit.Ctx(t)); derr != nil {
		t.Fatalf("Dispose: %v", derr)
	}
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

// start starts req on the provider named spawn and returns the settled,
// disposed run and its result.
func (e *env) start(t *testing.T, req subagent.StartRequest) (subagent.Run, subagent.Result) {
	t.Helper()
	run, err := e.svc.Start(t.Context(), spawn.DefaultName, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return run, finish(t, run)
}

func prompt(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

func final(s string) agent.Response {
	return agent.Response{Message: agent.Message{Content: prompt(s)}}
}

func toolNames(req agent.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Contract P1.
func TestP1_StartThroughTheServiceWithTheScriptedModel(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{
		"a.txt":            "alpha\nbeta\n",
		"sub/b.txt":        "gamma\n",
		"sub/deeper/c.txt": "delta",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := fstools.New(root, fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.register(t, spawn.Config{Tools: fs})
	parent := e.parent(t, "parent", 0, subagent.AgentOptions{})

	_, res := e.start(t, subagent.StartRequest{Prompt: prompt("echo hi"), Parent: parent})
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "hi" {
		t.Fatalf("echo: %+v", res)
	}

	_, res = e.start(t, subagent.StartRequest{Prompt: prompt("tally ."), Parent: parent, OutputSchema: scripted.TallySchema})
	if res.StopReason != subagent.Completed {
		t.Fatalf("tally: %+v", res)
	}
	// 3 files; lines 2+1+1 (the last one unterminated); bytes 11+6+5.
	jsonEqual(t, res.Structured, `{"path":".","files":3,"lines":4,"bytes":22,"folders":3}`)
}

// Contract P5.
func TestP5_SpawnDoesNotInheritParentContextAndDeclaresEveryCapability(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	p, err := spawn.New(spawn.Config{System: sys, Store: persistence.NewMemory(), Model: scripted.New()})
	if err != nil {
		t.Fatal(err)
	}
	if p.InheritsParentContext() {
		t.Fatal("InheritsParentContext is true for spawn")
	}
	want := subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	if got := p.Capabilities(); got != want {
		t.Fatalf("capabilities %+v, want %+v", got, want)
	}
	if p.Name() != spawn.DefaultName {
		t.Fatalf("name %q", p.Name())
	}
	if _, err := spawn.New(spawn.Config{Store: persistence.NewMemory(), Model: scripted.New()}); !errors.Is(err, spawn.ErrConfig) {
		t.Fatalf("New without a System: %v", err)
	}
}

// probe is a tool that reports the agent that called it.
type probe struct{ callers chan *agent.Agent }

func (p *probe) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "probe", Description: "report the caller", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (p *probe) Call(_ context.Context, caller *agent.Agent, _ json.RawMessage) (string, error) {
	p.callers <- caller
	return "ok", nil
}

// Contract R1.
func TestR1_LocalRunPublishesTheChildAgentAndSession(t *testing.T) {
	e := newEnv(t)
	pr := &probe{callers: make(chan *agent.Agent, 1)}
	// Call the probe once, then answer.
	model := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		if last := req.Messages[len(req.Messages)-1]; last.Role == agent.ToolRole {
			return final("done")
		}
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: "1", Name: "probe", Args: json.RawMessage(`{}`)}}}}
	})
	e.register(t, spawn.Config{Model: model, Tools: []agent.Tool{pr}})
	parent := e.parent(t, "parent", 1, subagent.AgentOptions{})

	run, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("go"), Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	child, ok := run.LocalAgent().(*agent.Agent)
	if !ok || child == nil {
		t.Fatalf("LocalAgent is %T, want *agent.Agent", run.LocalAgent())
	}
	// The session exists before Start returned, not only once the child ran.
	h, _, err := e.store.Load(t.Context(), run.ID())
	if err != nil {
		t.Fatalf("child session after Start: %v", err)
	}
	res := finish(t, run)
	if res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	if run.ID() != child.SessionID() || run.ID() == parent.SessionID() {
		t.Fatalf("run id %q, child session %q, parent %q", run.ID(), child.SessionID(), parent.SessionID())
	}
	if got := testkit.Recv(t, pr.callers, "the probe's caller"); got != child {
		t.Fatal("the agent that ran is not the exact LocalAgent")
	}
	want := subagent.SessionHeader{SessionID: run.ID(), ParentSessionID: "parent", DelegationDepth: 2}
	if h != want || child.Header() != want {
		t.Fatalf("stored header %+v, agent header %+v, want %+v", h, child.Header(), want)
	}
	if _, recs, err := e.store.Load(t.Context(), run.ID()); err != nil || len(recs) == 0 {
		t.Fatalf("child turns are not in its session: %d records, %v", len(recs), err)
	}
}

// Contract D6.
func TestD6_ChildDepthAndTheDelegateToolAtTheCap(t *testing.T) {
	e := newEnv(t)
	model := agenttest.NewRecorder(func(agent.Request) agent.Response { return final("done") })
	f := delegatetest.Follow(e.svc)
	// The tool's own cap (3) is looser than the request's, so hiding it at
	// depth 2 depends on the child inheriting the request's max depth.
	tool := delegate.New(delegate.Config{Service: f, Provider: spawn.DefaultName})
	t.Cleanup(tool.Close)
	p := e.register(t, spawn.Config{Model: model, Tools: []agent.Tool{tool}})
	f.Await(t, subagent.ProviderAdded{Provider: spawn.DefaultName})
	maxDepth := 2

	for _, c := range []struct {
		parentDepth int
		offered     bool
	}{{0, true}, {1, false}} {
		parent := e.parent(t, fmt.Sprint("parent-at-", c.parentDepth), c.parentDepth, subagent.AgentOptions{})
		task := "task of " + parent.ID()
		run, res := e.start(t, subagent.StartRequest{Prompt: prompt(task), Parent: parent, MaxDepth: &maxDepth})
		if res.StopReason != subagent.Completed {
			t.Fatalf("%s: %+v", task, res)
		}
		child := run.LocalAgent()
		if got := subagent.DelegationDepthOf(child); got != c.parentDepth+1 || child.Header().DelegationDepth != c.parentDepth+1 {
			t.Fatalf("%s: child depth %d (header %d), want %d", task, got, child.Header().DelegationDepth, c.parentDepth+1)
		}
		if m := child.Options().MaxDepth; m == nil || *m != maxDepth {
			t.Fatalf("%s: child inherited max depth %v, want %d", task, m, maxDepth)
		}
		if got := slices.Contains(toolNames(model.First(t, task)), delegate.DefaultName); got != c.offered {
			t.Fatalf("child at depth %d: delegate tool offered %v, want %v", c.parentDepth+1, got, c.offered)
		}
	}

	// A parent at its cap cannot delegate, whether the cap is the request's
	// or one it inherited; through the Service or calling the provider
	// directly, and no session is created.
	atCap := e.parent(t, "parent-at-cap", 2, subagent.AgentOptions{})
	inherited := e.parent(t, "parent-inherited-cap", 1, subagent.AgentOptions{SubagentDepth: 2, MaxDepth: &maxDepth})
	before := e.store.creates()
	for _, req := range []subagent.StartRequest{
		{Prompt: prompt("echo no"), Parent: atCap, MaxDepth: &maxDepth},
		{Prompt: prompt("echo no"), Parent: inherited},
	} {
		for via, start := range map[string]func() (subagent.Run, error){
			"service":  func() (subagent.Run, error) { return e.svc.Start(t.Context(), spawn.DefaultName, req) },
			"provider": func() (subagent.Run, error) { return p.Start(t.Context(), subagent.Scope{}, req) },
		} {
			run, err := start()
			var de *rules.DepthError
			if !errors.As(err, &de) || de.Depth != 2 || de.Max != 2 || run != nil {
				t.Fatalf("%s, parent %s: got run %v, err %v; want a rules.DepthError{2, 2}", via, req.Parent.ID(), run, err)
			}
		}
	}
	if got := e.store.creates(); got != before {
		t.Fatalf("a start refused for depth created %d sessions", got-before)
	}
}

// Contract P1.
func TestP1_OutputSchemaSettlesStructuredOrValidationError(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{})
	parent := e.parent(t, "parent", 0, subagent.AgentOptions{})
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)

	_, res := e.start(t, subagent.StartRequest{Prompt: prompt(`echo {"n": 7}`), Parent: parent, OutputSchema: schema})
	if res.StopReason != subagent.Completed {
		t.Fatalf("matching answer: %+v", res)
	}
	jsonEqual(t, res.Structured, `{"n":7}`)

	for answer, detail := range map[string]string{
		`echo {"n": "seven"}`: "does not match the output schema",
		`echo seven`:          "not JSON",
	} {
		_, res := e.start(t, subagent.StartRequest{Prompt: prompt(answer), Parent: parent, OutputSchema: schema})
		if res.StopReason != subagent.Error || !strings.Contains(res.Detail, detail) || res.Structured != nil {
			t.Fatalf("%s: got %+v, want stop reason error with %q", answer, res, detail)
		}
	}
}

// Contract P1.
func TestP1_ToolFilterAndPersonaShapeTheChildRequest(t *testing.T) {
	fs, err := fstools.New(t.TempDir(), fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	model := agenttest.NewRecorder(func(agent.Request) agent.Response { return final("done") })
	e.register(t, spawn.Config{Model: model, Tools: fs})
	parent := e.parent(t, "parent", 0, subagent.AgentOptions{})
	persona := "You are terse."

	e.start(t, subagent.StartRequest{Prompt: prompt("plain"), Parent: parent})
	e.start(t, subagent.StartRequest{
		Prompt: prompt("filtered"), Parent: parent, Persona: &persona,
		ToolFilter: &subagent.ToolFilter{Allow: []string{"count", "list"}},
	})
	e.start(t, subagent.StartRequest{Prompt: prompt("denied"), Parent: parent, ToolFilter: &subagent.ToolFilter{Deny: []string{"read", "count"}}})

	for task, want := range map[string]struct {
		tools  []string
		system string
	}{
		"plain":    {[]string{"list", "read", "count"}, ""},
		"filtered": {[]string{"list", "count"}, persona},
		"denied":   {[]string{"list"}, ""},
	} {
		req := model.First(t, task)
		if got := toolNames(req); !slices.Equal(got, want.tools) || req.System != want.system {
			t.Errorf("%s: tools %v system %q, want %v %q", task, got, req.System, want.tools, want.system)
		}
	}
}

// TestR6_S5_CancelDuringSetupRollsBackEverything cancels the start context
// while agent.New creates the child's session: the provider must dispose the
// run it started and delete the session before Start returns.
// Contracts R6, S5.
func TestR6_S5_CancelDuringSetupRollsBackEverything(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{})
	parent := e.parent(t, "parent", 0, subagent.AgentOptions{})
	// Warm up: the parent actor exists from the first start on.
	e.start(t, subagent.StartRequest{Prompt: prompt("echo warm"), Parent: parent})
	actorsBefore := testkit.LiveActors(e.sys)
	ignore := goleak.IgnoreCurrent()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var childID string
	e.store.mu.Lock()
	e.store.onCreate = func(h subagent.SessionHeader) {
		childID = h.SessionID
		cancel()
	}
	e.store.mu.Unlock()

	run, err := e.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Prompt: prompt("echo never"), Parent: parent})
	if run != nil || !errors.Is(err, subagent.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Start: run %v, err %v; want ErrCancelled and context.Canceled", run, err)
	}
	if childID == "" {
		t.Fatal("the child's session was never created: the test did not reach the rollback")
	}
	if _, _, err := e.store.Load(t.Context(), childID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("child session after rollback: %v, want ErrNotFound", err)
	}
	if got := testkit.LiveActors(e.sys); got != actorsBefore {
		t.Fatalf("live actors %d after rollback, want %d", got, actorsBefore)
	}
	if err := goleak.Find(ignore, testkit.DeadLetters); err != nil {
		t.Fatal(err)
	}
}

// TestR6_SetupFailureLeavesNothing: agent.New refuses the child (duplicate
// tool names) before it creates a session; Start fails with that error and
// nothing was started.
// Contract R6.
func TestR6_SetupFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	pr := &probe{}
	e.register(t, spawn.Config{Tools: []agent.Tool{pr, pr}})
	parent := e.parent(t, "parent", 0, subagent.AgentOptions{})
	// Subscribing spawns the parent actor before the count is taken.
	defer e.svc.ListenParent(parent.SessionID(), func(subagent.Event) error { return nil }).Release()
	created, live := e.store.creates(), testkit.LiveActors(e.sys)
	_, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("echo no"), Parent: parent})
	if !errors.Is(err, agent.ErrConfig) {
		t.Fatalf("Start: %v, want agent.ErrConfig", err)
	}
	if e.store.creates() != created || testkit.LiveActors(e.sys) != live {
		t.Fatalf("sessions %d→%d, live actors %d→%d", created, e.store.creates(), live, testkit.LiveActors(e.sys))
	}
}

// patient answers like the scripted model, except that it keeps working
// (listing the root again) until a steer has reached one of its requests:
// the child is certain to be live when the test steers it.
type patient struct{ agent.Model }

func (p patient) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	steered := 0
	for _, m := range req.Messages {
		if m.Role == agent.User {
			steered++
		}
	}
	resp, err := p.Model.Generate(ctx, req)
	if err == nil && steered < 2 && len(resp.Message.ToolCalls) == 0 {
		resp.Message = agent.Message{ToolCalls: []agent.ToolCall{{ID: "again", Name: "list", Args: json.RawMessage(`{"path":"."}`)}}}
	}
	return resp, err
}

// patientTools are the tools a patient model lists a directory with.
func patientTools(t *testing.T) []agent.Tool {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := fstools.New(root, fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// Contract R4.
func TestR4_SteerReachesTheSpawnedChildsNextModelRequest(t *testing.T) {
	e := newEnv(t)
	e.register(t, spawn.Config{Tools: patientTools(t), Model: patient{scripted.New()}, MaxSteps: math.MaxInt})
	run, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("echo done"), Parent: e.parent(t, "p", 0, subagent.AgentOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	steerer, ok := run.(subagent.Steerer)
	if !ok {
		t.Fatal("a spawned run is not steerable")
	}
	if err := steerer.Steer(testkit.Ctx(t), prompt("wrap up")); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	res := finish(t, run)
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "done" {
		t.Fatalf("the steered child ended %+v", res)
	}
	if err := steerer.Steer(testkit.Ctx(t), prompt("too late")); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer after dispose: %v", err)
	}
}
