package subactor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
	delegatetool "github.com/subactor/subactor/tools/delegate"
)

// endpoint is a client of a scripted OpenAI-compatible server.
func endpoint(t *testing.T, s *openaitest.Server) openai.Config {
	t.Helper()
	return openai.Config{BaseURL: s.URL, Model: "test-model", HTTPClient: s.Client(), MaxAttempts: 1}
}

func clientOf(t *testing.T, cfg openai.Config) *openai.Client {
	t.Helper()
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func delegations(names ...string) openaitest.Step {
	var calls []openaitest.ToolCall
	for i, n := range names {
		calls = append(calls, openaitest.ToolCall{ID: fmt.Sprint("c", i), Name: n, Args: fmt.Sprintf(`{"description":"part %d","prompt":"do part %d"}`, i, i)})
	}
	return openaitest.Step{ToolCalls: calls, Usage: &openaitest.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 40}}
}

func reply(text string, in, out int) openaitest.Step {
	return openaitest.Step{Text: text, Usage: &openaitest.Usage{PromptTokens: in, CompletionTokens: out}}
}

// Contracts U1, M1: a parent with three children on two endpoints. Its
// usage is exactly the sum of what the servers handed out: its own model
// calls and its children's, rolled up.
func TestU1M1_AParentsUsageIsItsOwnPlusItsChildren(t *testing.T) {
	main := openaitest.NewServer(t, delegations("fast", "fast", "smart"), reply("all done", 300, 10))
	fast := openaitest.NewServer(t, reply("fast part", 11, 3), reply("fast part", 11, 3))
	smart := openaitest.NewServer(t, reply("smart part", 50, 7))
	rt, err := subactor.New(subactor.Config{Model: clientOf(t, endpoint(t, fast)), Provider: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	smartProvider, err := spawn.New(spawn.Config{Name: "smart", System: rt.System, Store: rt.Store, Model: clientOf(t, endpoint(t, smart))})
	if err != nil {
		t.Fatal(err)
	}
	release, err := rt.Service.RegisterProvider(smartProvider)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tools := []agent.Tool{}
	for _, name := range []string{"fast", "smart"} {
		tool := delegatetool.New(delegatetool.Config{Service: rt.Service, Provider: name, Name: name})
		defer tool.Close()
		tools = append(tools, tool)
	}
	parent, err := agent.New(testkit.Ctx(t), agent.Config{Store: rt.Store, Model: clientOf(t, endpoint(t, main)), Tools: tools,
		Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	res := parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("split the work")}, nil)
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "all done" {
		t.Fatalf("parent %+v", res)
	}
	want := subagent.Usage{InputTokens: 100 + 300 + 2*11 + 50, OutputTokens: 20 + 10 + 2*3 + 7, CachedInputTokens: 40}
	if res.Usage == nil || *res.Usage != want {
		t.Fatalf("parent usage %+v, want %+v (its own calls and its children's)", res.Usage, want)
	}
	if n := len(fast.Requests()) + len(smart.Requests()); n != 3 {
		t.Fatalf("%d child model calls, want 3", n)
	}
}

// Contract M1: a child's model provider is checked at Start, before any
// provider code; an unknown one is a typed error.
func TestM1_AnUnknownModelProviderIsRefusedAtStart(t *testing.T) {
	s := openaitest.NewServer(t)
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	p, err := spawn.New(spawn.Config{Name: "models", System: rt.System, Store: rt.Store, Model: rt.Model,
		Models: openai.Endpoints{"local": endpoint(t, s)}})
	if err != nil {
		t.Fatal(err)
	}
	release, _ := rt.Service.RegisterProvider(p)
	defer release()
	parent, err := rt.NewAgent(testkit.Ctx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Service.Start(testkit.Ctx(t), "models", subagent.StartRequest{Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text("x")}, Options: subagent.AgentOptions{ModelProvider: "elsewhere"}})
	if !errors.Is(err, subagent.ErrInvalidRequest) || !strings.Contains(err.Error(), `openai: unknown model provider "elsewhere"`) {
		t.Fatalf("Start on an unknown model provider: %v", err)
	}
	if sessions, _ := rt.Store.Sessions(testkit.Ctx(t)); len(sessions) != 1 {
		t.Fatalf("%d sessions: a refused start created one", len(sessions))
	}
}

// Contract F1: five delegations in one turn run concurrently, at most the
// parent's cap at once; the server sees the overlap.
func TestF1_FiveForegroundChildrenOverlapUpToTheCap(t *testing.T) {
	const limit = 3
	main := openaitest.NewServer(t, delegations("sub", "sub", "sub", "sub", "sub"), reply("done", 1, 1))
	held := openaitest.Step{Text: "part", Hold: true}
	children := openaitest.NewServer(t, held, held, held, held, held)
	rt, err := subactor.New(subactor.Config{Model: clientOf(t, endpoint(t, children)), Provider: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	tool := delegatetool.New(delegatetool.Config{Service: rt.Service, Provider: "sub", Name: "sub"})
	defer tool.Close()
	parent, err := agent.New(testkit.Ctx(t), agent.Config{Store: rt.Store, Model: clientOf(t, endpoint(t, main)), Tools: []agent.Tool{tool},
		Header: subagent.SessionHeader{SessionID: "parent"}, MaxParallelTools: limit})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan subagent.Result, 1)
	go func() { done <- parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("fan out")}, nil) }()
	children.WaitInFlight(t, limit)
	children.Release()
	if res := testkit.Recv(t, done, "the parent"); res.StopReason != subagent.Completed {
		t.Fatalf("parent %+v", res)
	}
	if p := children.Peak(); p != limit {
		t.Fatalf("peak of %d child requests at once, want the cap %d", p, limit)
	}
	if n := len(children.Requests()); n != 5 {
		t.Fatalf("%d child requests, want 5", n)
	}
}

// Contract F1: cancelling the parent cancels every child it has running.
func TestF1_CancellingTheParentCancelsAllItsChildren(t *testing.T) {
	main := openaitest.NewServer(t, delegations("sub", "sub", "sub"))
	stalled := openaitest.Stall(openaitest.Reply("never"), 0)
	children := openaitest.NewServer(t, stalled, stalled, stalled)
	rt, err := subactor.New(subactor.Config{Model: clientOf(t, endpoint(t, children)), Provider: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	tool := delegatetool.New(delegatetool.Config{Service: rt.Service, Provider: "sub", Name: "sub"})
	defer tool.Close()
	parent, err := agent.New(testkit.Ctx(t), agent.Config{Store: rt.Store, Model: clientOf(t, endpoint(t, main)), Tools: []agent.Tool{tool},
		Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	done := make(chan subagent.Result, 1)
	go func() { done <- parent.Run(ctx, []subagent.ContentBlock{subagent.Text("fan out")}, nil) }()
	children.WaitStalled(t, 3)
	cancel()
	if res := testkit.Recv(t, done, "the cancelled parent"); res.StopReason != subagent.Aborted {
		t.Fatalf("parent %+v", res)
	}
	for i, r := range children.WaitFinished(t, 3) {
		if !r.Cancelled {
			t.Fatalf("child request %d was not cancelled", i)
		}
	}
}

// Contract E6: a child on a streaming endpoint reports its text as it
// streams: the parent's listener gets the pieces, in order, between the
// child's start and end, and they make up the answer.
func TestE6_StreamedTextReachesTheParentsListenerAsProgress(t *testing.T) {
	children := openaitest.NewServer(t, openaitest.Step{Text: "one two three four", ChunkSize: 4})
	rt, err := subactor.New(subactor.Config{Model: clientOf(t, endpoint(t, children))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(testkit.Ctx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan subagent.Event, 64)
	sub := rt.Service.ListenParent(parent.SessionID(), func(ev subagent.Event) error { events <- ev; return nil })
	defer sub.Release()
	res, err := rt.Delegate(testkit.Ctx(t), parent, "count")
	if err != nil || subagent.TextOf(res.Output) != "one two three four" {
		t.Fatalf("child %+v, %v", res, err)
	}
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	var streamed string
	var pieces int
	for started := false; ; {
		ev := testkit.Recv(t, events, "the child's events")
		switch ev := ev.(type) {
		case subagent.RunStarted:
			started = true
		case subagent.RunProgress:
			if !started {
				t.Fatal("progress before the start")
			}
			if ev.Kind == subagent.TextDelta {
				streamed += ev.Text
				pieces++
			}
		case subagent.RunEnded:
			if streamed != "one two three four" || pieces < 4 {
				t.Fatalf("streamed %q in %d pieces", streamed, pieces)
			}
			return
		}
	}
}

// Contract M1: the short path takes the node's model choice: a -models
// file's default endpoint drives the parent, whose options name it for its
// children to inherit. Nothing is contacted.
func TestM1_ShortPathTakesTheNodesModelChoice(t *testing.T) {
	models, err := openai.Select(openai.Choice{
		ModelsFile: "models.json",
		ModelsData: []byte(`{"endpoints": {"local": {"baseURL": "http://127.0.0.1:1/v1", "model": "m", "models": ["m", "n"]}}}`),
		Getenv:     func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := subactor.New(subactor.Config{Models: models})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	if c, ok := rt.Model.(*openai.Client); !ok || c.Model() != "m" {
		t.Fatalf("model %T %v, want the file's endpoint on m", rt.Model, rt.Model)
	}
	if o := parent.Options(); o.ModelProvider != "local" || o.Model != "m" {
		t.Fatalf("parent options %+v, want the default endpoint and model", o)
	}
}
