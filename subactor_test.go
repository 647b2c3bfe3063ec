package subactor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// The short path, and an LLM that delegates (contract T1). New reads no
// environment: the program resolves the model with openai.Select, as
// cmd/node does (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL, or
// DEEPSEEK_API_KEY alone, or a -models file, Choice.ModelsFile), and
// passes it as Config.Models. A program leaves Getenv nil to read its own
// environment; this example reads an empty one, so Select resolves no
// endpoint and New runs offline on the embedded scripted model. The parent's model delegates through its
// "subagent" tool (the scripted model's "delegate" task calls it and
// answers what the child answered); the program may also delegate itself,
// a child started, awaited and disposed in one call.
func ExampleNew() {
	ctx := context.Background()
	models, err := openai.Select(openai.Choice{Getenv: func(string) string { return "" }})
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := subactor.New(subactor.Config{Models: models})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	parent, err := rt.NewAgent(ctx, "parent")
	if err != nil {
		fmt.Println(err)
		return
	}
	res := parent.Run(ctx, []subagent.ContentBlock{subagent.Text("delegate echo hello")}, nil)
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))

	res, err = rt.Delegate(ctx, parent, "echo hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))
	// Output:
	// completed the subagent says: hello
	// completed hello
}

// An embedder that already runs a protoactor system hands it in through
// actors.Wrap; Close leaves it running, for the embedder to shut down.
func ExampleNew_existingSystem() {
	ctx := context.Background()
	sys := actor.NewActorSystem()
	defer sys.Shutdown()

	rt, err := subactor.New(subactor.Config{System: actors.Wrap(sys)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	parent, err := rt.NewAgent(ctx, "parent")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := rt.Delegate(ctx, parent, "echo hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))
	// Output: completed hello
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	goroutines := goleak.IgnoreCurrent()
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	delegate(t, rt, "echo hello")
	rt.Close()
	rt.Close() // idempotent
	if !rt.System.ActorSystem().IsStopped() {
		t.Fatal("Close left the System New made running")
	}
	if err := goleak.Find(goroutines, testkit.DeadLetters); err != nil {
		t.Fatal(err)
	}
}

func TestCloseLeavesAGivenSystemRunning(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	for i := range 2 { // the second runtime runs on what the first left
		rt, err := subactor.New(subactor.Config{System: sys})
		if err != nil {
			t.Fatal(err)
		}
		if res := delegate(t, rt, "echo hello"); subagent.TextOf(res.Output) != "hello" {
			t.Fatalf("runtime %d: output %q", i, subagent.TextOf(res.Output))
		}
		rt.Close()
		if sys.ActorSystem().IsStopped() {
			t.Fatalf("runtime %d's Close shut down a System it did not create", i)
		}
	}
}

func TestConfigNamesTheProviderAndItsTools(t *testing.T) {
	rt, err := subactor.New(subactor.Config{Provider: "kid", Tools: []agent.Tool{stubTool{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if got := rt.Service.List(); !slices.Equal(got, []string{"kid"}) {
		t.Fatalf("providers %v, want [kid]", got)
	}
	if rt.Provider.Name() != "kid" {
		t.Fatalf("provider name %q", rt.Provider.Name())
	}
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	// The spawn provider checks a tool filter against the children's tools.
	run, err := rt.Service.Start(testkit.Ctx(t), "kid", subagent.StartRequest{
		Parent:     parent,
		Prompt:     []subagent.ContentBlock{subagent.Text("echo hi")},
		ToolFilter: &subagent.ToolFilter{Allow: []string{"stub"}},
	})
	if err != nil {
		t.Fatalf("children lack the configured tool: %v", err)
	}
	if err := run.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestDelegateDisposesTheRunOnEveryPath(t *testing.T) {
	model := &gatedModel{entered: make(chan struct{}, 1)}
	rt, err := subactor.New(subactor.Config{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	// A listener keeps the parent's actor alive, so every actor counted
	// after a delegation is one it left behind.
	defer rt.Service.ListenParent(parent.SessionID(), func(subagent.Event) error { return nil }).Release()
	before := testkit.LiveActors(rt.System)

	t.Run("completed", func(t *testing.T) {
		res, err := rt.Delegate(testkit.Ctx(t), parent, "echo hello")
		if err != nil || res.StopReason != subagent.Completed {
			t.Fatalf("Delegate = %v, %v", res.StopReason, err)
		}
		if n := testkit.LiveActors(rt.System); n != before {
			t.Fatalf("live actors %d, want %d", n, before)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testkit.Ctx(t))
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := rt.Delegate(ctx, parent, "block")
			done <- err
		}()
		testkit.Recv(t, model.entered, "the child's model call")
		cancel()
		err := testkit.Recv(t, done, "Delegate to return")
		if !errors.Is(err, subagent.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Delegate error = %v", err)
		}
		if n := testkit.LiveActors(rt.System); n != before {
			t.Fatalf("live actors %d, want %d: the run outlived Delegate", n, before)
		}
	})
}

func TestDelegateReturnsTheServicesTypedErrors(t *testing.T) {
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if _, err := rt.Delegate(nilCtx, parent, "echo hi"); !errors.Is(err, subagent.ErrNilContext) {
		t.Fatalf("nil ctx: %v", err)
	}
	var invalid *subagent.InvalidRequestError
	if _, err := rt.Delegate(testkit.Ctx(t), nil, "echo hi"); !errors.As(err, &invalid) || invalid.Field != "parent" {
		t.Fatalf("nil parent: %v", err)
	}
	if _, err := rt.Delegate(testkit.Ctx(t), (*agent.Agent)(nil), "echo hi"); !errors.As(err, &invalid) || invalid.Field != "parent" {
		t.Fatalf("typed nil parent: %v", err)
	}
	rt.Close()
	if _, err := rt.Delegate(testkit.Ctx(t), parent, "echo hi"); !errors.Is(err, subagent.ErrServiceClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestNewAgentNeedsASessionID(t *testing.T) {
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.NewAgent(testkit.Ctx(t), ""); !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), "Header.SessionID") {
		t.Fatalf("NewAgent(\"\") = %v", err)
	}
}

// delegate runs prompt through rt under a deadline and fails the test on
// an error.
func delegate(t *testing.T, rt *subactor.Runtime, prompt string) subagent.Result {
	t.Helper()
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Delegate(testkit.Ctx(t), parent, prompt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// gatedModel is the scripted model, except that a request whose last
// message reads "block" signals entered and waits for its context to end.
type gatedModel struct{ entered chan struct{} }

func (m *gatedModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if n := len(req.Messages); n > 0 && subagent.TextOf(req.Messages[n-1].Content) == "block" {
		m.entered <- struct{}{}
		<-ctx.Done()
		return agent.Response{}, ctx.Err()
	}
	return scripted.New().Generate(ctx, req)
}

// stubTool is a child's tool that is never called.
type stubTool struct{}

func (stubTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "stub", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (stubTool) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) { return "", nil }

// New reads no environment (the package doc says so): with OPENAI_* set
// to a live endpoint, New(Config{}) runs on the scripted model and the
// endpoint is asked nothing.
func TestNewReadsNoEnvironment(t *testing.T) {
	srv := openaitest.NewServer(t, openaitest.Reply("from the endpoint"))
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk")
	t.Setenv("OPENAI_MODEL", "m")
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Delegate(testkit.Ctx(t), parent, "echo hello")
	if err != nil || subagent.TextOf(res.Output) != "hello" {
		t.Fatalf("Delegate = %q, %v; want the scripted model's hello", subagent.TextOf(res.Output), err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the endpoint of OPENAI_BASE_URL got %d requests", n)
	}
}
