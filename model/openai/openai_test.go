package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock records the backoff waits instead of sleeping them.
type clock struct {
	mu    sync.Mutex
	waits []time.Duration
	now   time.Time
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// client returns a client on s with an injected clock.
func client(t *testing.T, s *openaitest.Server, edit ...func(*openai.Config)) (*openai.Client, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cfg := openai.Config{
		BaseURL:    s.URL,
		APIKey:     "sk-test",
		Model:      "test-model",
		HTTPClient: s.Client(),
	}
	openai.SetSleep(&cfg, clk.sleep)
	openai.SetNow(&cfg, func() time.Time { return clk.now })
	for _, e := range edit {
		e(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func ask(text string) agent.Request {
	return agent.Request{Messages: []agent.Message{{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text(text)}}}}
}

func TestM1_StreamsInterleavedTextAndToolCallDeltas(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{
		Text:       "Let me look at both.",
		ChunkSize:  3,
		Interleave: true,
		ToolCalls: []openaitest.ToolCall{
			{ID: "call_a", Name: "list", Args: `{"path":"src"}`},
			{ID: "call_b", Name: "count", Args: `{"path":"go.mod"}`},
		},
	})
	c, _ := client(t, s)
	resp, err := c.Generate(testkit.Ctx(t), ask("survey ."))
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Message{
		Role:    agent.Assistant,
		Content: []subagent.ContentBlock{subagent.Text("Let me look at both.")},
		ToolCalls: []agent.ToolCall{
			{ID: "call_a", Name: "list", Args: json.RawMessage(`{"path":"src"}`)},
			{ID: "call_b", Name: "count", Args: json.RawMessage(`{"path":"go.mod"}`)},
		},
	}
	if !reflect.DeepEqual(resp.Message, want) || resp.StopReason != subagent.Completed {
		t.Errorf("got %+v %s, want %+v", resp.Message, resp.StopReason, want)
	}
	if r := s.WaitFinished(t, 1)[0]; !r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage {
		t.Errorf("request did not stream with usage: %+v", r)
	}
}

func TestM1_ToolCallArgumentsOverSeveralChunks(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Calls(openaitest.ToolCall{
		ID: "call_1", Name: "subagent", Pieces: []string{`{"descr`, `iption":"tally a",`, `"prompt":"tally ./a"`, `}`},
	}))
	c, _ := client(t, s)
	resp, err := c.Generate(testkit.Ctx(t), ask("survey ."))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 1 || calls[0].ID != "call_1" || calls[0].Name != "subagent" ||
		string(calls[0].Args) != `{"description":"tally a","prompt":"tally ./a"}` {
		t.Errorf("calls %+v", calls)
	}
}

func TestM1_MapsRequest(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("done"))
	c, _ := client(t, s)
	req := agent.Request{
		System: "be brief",
		Messages: []agent.Message{
			{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text("list it")}},
			{Role: agent.Assistant, Content: []subagent.ContentBlock{subagent.Text("sure")}, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "list", Args: json.RawMessage(`{"path":"."}`)}}},
			{Role: agent.ToolRole, ToolCallID: "c1", IsError: true, Content: []subagent.ContentBlock{subagent.Text("no such dir")}},
			{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text("steer")}},
		},
		Tools:     []agent.ToolSpec{{Name: "list", Description: "lists", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}, {Name: "noargs"}},
		MaxTokens: 321,
	}
	if _, err := c.Generate(testkit.Ctx(t), req); err != nil {
		t.Fatal(err)
	}
	r := s.WaitFinished(t, 1)[0]
	if r.Model != "test-model" || r.MaxTokens != 321 || r.Authorization != "Bearer sk-test" || r.ResponseFormat != nil {
		t.Errorf("request %+v", r)
	}
	type msg struct{ role, text, call, callID string }
	var got []msg
	for _, m := range r.Messages {
		g := msg{role: m.Role, text: m.Text(), callID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			g.call += tc.ID + " " + tc.Type + " " + tc.Function.Name + " " + tc.Function.Arguments
		}
		got = append(got, g)
	}
	want := []msg{
		{role: "system", text: "be brief"},
		{role: "user", text: "list it"},
		{role: "assistant", text: "sure", call: `c1 function list {"path":"."}`},
		{role: "tool", text: "no such dir", callID: "c1"},
		{role: "user", text: "steer"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages\n got %+v\nwant %+v", got, want)
	}
	if len(r.Tools) != 2 || r.Tools[0].Type != "function" || r.Tools[0].Function.Name != "list" || r.Tools[0].Function.Description != "lists" {
		t.Fatalf("tools %+v", r.Tools)
	}
	var params map[string]any
	if err := json.Unmarshal(r.Tools[0].Function.Parameters, &params); err != nil || params["properties"] == nil {
		t.Errorf("parameters %s", r.Tools[0].Function.Parameters)
	}
	if err := json.Unmarshal(r.Tools[1].Function.Parameters, &params); err != nil || params["type"] != "object" {
		t.Errorf("a tool without parameters sent %s", r.Tools[1].Function.Parameters)
	}
}

func TestM1_SendsResponseFormatWithSchema(t *testing.T) {
	schema := `{"type":"object","properties":{"files":{"type":"integer"}},"required":["files"]}`
	s := openaitest.NewServer(t, openaitest.Reply(`{"files":3}`), openaitest.Reply(`{"files":3}`))
	c, _ := client(t, s)
	req := ask("tally .")
	req.OutputSchema = json.RawMessage(schema)
	resp, err := c.Generate(testkit.Ctx(t), req)
	if err != nil || subagent.TextOf(resp.Message.Content) != `{"files":3}` {
		t.Fatalf("%+v, %v", resp, err)
	}
	rf := s.WaitFinished(t, 1)[0].ResponseFormat
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil || rf.JSONSchema.Name == "" ||
		rf.JSONSchema.Strict == nil || *rf.JSONSchema.Strict || !sameJSON(t, rf.JSONSchema.Schema, schema) {
		t.Errorf("response_format %+v", rf)
	}

	// JSON mode (DeepSeek): json_object, and the schema goes in the prompt.
	c, _ = client(t, s, func(cfg *openai.Config) { cfg.OutputSchema = "json_object" })
	if _, err := c.Generate(testkit.Ctx(t), req); err != nil {
		t.Fatal(err)
	}
	r := s.WaitFinished(t, 2)[1]
	if r.ResponseFormat == nil || r.ResponseFormat.Type != "json_object" || r.ResponseFormat.JSONSchema != nil ||
		r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Text(), schema) || !strings.Contains(r.Messages[0].Text(), "JSON") {
		t.Errorf("JSON mode request %+v", r)
	}
}

func sameJSON(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestM1_RetriesAfter429HonouringRetryAfter(t *testing.T) {
	s := openaitest.NewServer(t,
		openaitest.Status(429, "7"),
		openaitest.Status(429, "Fri, 02 Jan 2026 03:04:17 GMT"), // 12s after the injected now
		openaitest.Step{Status: 503, Body: "x", RetryAfter: "0"},
		openaitest.Reply("finally"),
	)
	c, clk := client(t, s)
	resp, err := c.Generate(testkit.Ctx(t), ask("hi"))
	if err != nil || subagent.TextOf(resp.Message.Content) != "finally" {
		t.Fatalf("%+v, %v", resp, err)
	}
	if got, want := clk.Waits(), []time.Duration{7 * time.Second, 12 * time.Second, 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if n := len(s.WaitFinished(t, 4)); n != 4 {
		t.Errorf("%d requests", n)
	}
}

// A retry is told to the request's OnRetry before its wait, so that the
// live view shows it: each failed attempt, its error and the wait.
func TestM1_RetriesAreToldToOnRetry(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Status(429, "7"), openaitest.Status(503, "2"), openaitest.Reply("ok"))
	c, clk := client(t, s)
	req := ask("hi")
	var told []string
	req.OnRetry = func(attempt int, err error, wait time.Duration) {
		told = append(told, fmt.Sprintf("%d %v %v", attempt, err.(*openai.APIError).Status, wait))
		if n := len(clk.Waits()); n != attempt-1 {
			t.Errorf("attempt %d told after %d waits, want before its own", attempt, n)
		}
	}
	if _, err := c.Generate(testkit.Ctx(t), req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 429 7s", "2 503 2s"}; !reflect.DeepEqual(told, want) {
		t.Errorf("OnRetry told %q, want %q", told, want)
	}
}

func TestM1_Retries500TwiceThenSucceeds(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Status(500, ""), openaitest.Status(502, ""), openaitest.Reply("ok"))
	c, clk := client(t, s, func(cfg *openai.Config) { cfg.Backoff = time.Second })
	if _, err := c.Generate(testkit.Ctx(t), ask("hi")); err != nil {
		t.Fatal(err)
	}
	// Exponential with jitter: the n-th wait is b·2ⁿ⁻¹ ± 50%.
	waits := clk.Waits()
	if len(waits) != 2 || waits[0] < 500*time.Millisecond || waits[0] > 1500*time.Millisecond ||
		waits[1] < time.Second || waits[1] > 3*time.Second {
		t.Errorf("waits %v", waits)
	}
}

func TestM1_RetryBudgetExhaustedIsAPIError(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Status(503, ""), openaitest.Status(503, ""),
		openaitest.Step{Status: 429, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`, RetryAfter: "1"})
	c, clk := client(t, s, func(cfg *openai.Config) { cfg.MaxAttempts = 3 })
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T), want *openai.APIError", err, err)
	}
	if apiErr.Status != 429 || apiErr.Attempts != 3 || apiErr.RetryAfter != time.Second || !strings.Contains(apiErr.Body, "slow down") {
		t.Errorf("error %+v", apiErr)
	}
	if !strings.Contains(err.Error(), "slow down") || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("message %q", err)
	}
	if len(clk.Waits()) != 2 || s.Remaining() != 0 {
		t.Errorf("waits %v, %d steps left", clk.Waits(), s.Remaining())
	}
}

func TestM1_ClientErrorIsNotRetried(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{Status: 401, Body: "not json at all"})
	c, clk := client(t, s)
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Body != "not json at all" || apiErr.Attempts != 1 || openai.Retryable(apiErr) {
		t.Fatalf("error %v", err)
	}
	if len(clk.Waits()) != 0 {
		t.Errorf("waited %v", clk.Waits())
	}
}

func TestM1_RetryAfterBeyondLimitGivesUp(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Status(429, "3600"))
	c, clk := client(t, s)
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.RetryAfter != time.Hour || len(clk.Waits()) != 0 {
		t.Fatalf("error %v, waits %v", err, clk.Waits())
	}
}

func TestM1_RealSleepAndCancelDuringBackoff(t *testing.T) {
	// The default sleeper: a zero Retry-After passes at once.
	s := openaitest.NewServer(t, openaitest.Status(503, "0"), openaitest.Reply("ok"))
	c, err := openai.New(openai.Config{BaseURL: s.URL, Model: "m", HTTPClient: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(testkit.Ctx(t), ask("hi")); err != nil {
		t.Fatal(err)
	}

	// A long backoff ends as soon as the context does.
	s = openaitest.NewServer(t, openaitest.Status(503, "50"))
	c, err = openai.New(openai.Config{BaseURL: s.URL, Model: "m", HTTPClient: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	errs := make(chan error, 1)
	go func() {
		_, err := c.Generate(ctx, ask("hi"))
		errs <- err
	}()
	s.WaitFinished(t, 1)
	cancel()
	if err := testkit.Recv(t, errs, "Generate to return after cancel in backoff"); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestM1_MalformedBodyIsProtocolError(t *testing.T) {
	s := openaitest.NewServer(t,
		openaitest.Malformed(),
		openaitest.Step{Malformed: true, Body: "data: {\"error\":{\"message\":\"upstream broke\"}}\n\n"},
		openaitest.Step{Malformed: true, Body: "this is not an event stream"},
	)
	c, clk := client(t, s)
	for i, want := range []string{"malformed chunk", "upstream broke", "without a finish reason"} {
		_, err := c.Generate(testkit.Ctx(t), ask("hi"))
		var perr *openai.ProtocolError
		if !errors.As(err, &perr) || !strings.Contains(err.Error(), want) {
			t.Errorf("case %d: error %v (%T), want a *ProtocolError saying %q", i, err, err, want)
		}
	}
	if len(clk.Waits()) != 0 {
		t.Errorf("a protocol error was retried: %v", clk.Waits())
	}
}

func TestM1_DroppedConnectionMidStreamIsError(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Drop(openaitest.Step{Text: "partial answer", ChunkSize: 2}, 3))
	c, _ := client(t, s)
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var perr *openai.ProtocolError
	if !errors.As(err, &perr) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v (%T), want a *ProtocolError wrapping io.ErrUnexpectedEOF", err, err)
	}
}

func TestM1_CancelMidStreamReturnsAtOnce(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Stall(openaitest.Step{Text: "never finished", ChunkSize: 2}, 3))
	c, _ := client(t, s)
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	errs := make(chan error, 1)
	go func() {
		_, err := c.Generate(ctx, ask("hi"))
		errs <- err
	}()
	s.WaitStalled(t, 1) // three chunks are out: the client is reading the stream
	cancel()
	if err := testkit.Recv(t, errs, "Generate to return after cancel"); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if r := s.WaitFinished(t, 1)[0]; !r.Cancelled {
		t.Error("the server did not see the request cancelled")
	}
}

func TestU1_UsageMapped(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{Text: "x", Usage: &openaitest.Usage{PromptTokens: 120, CompletionTokens: 34, CachedTokens: 100}})
	c, _ := client(t, s)
	resp, err := c.Generate(testkit.Ctx(t), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	// Cached tokens are part of the prompt tokens, singled out beside them.
	if resp.Usage != (subagent.Usage{InputTokens: 120, OutputTokens: 34, CachedInputTokens: 100}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestM1_FinishReasonsMapped(t *testing.T) {
	cases := []struct {
		step openaitest.Step
		want subagent.StopReason
	}{
		{openaitest.Step{Text: "a", Finish: "stop"}, subagent.Completed},
		{openaitest.Calls(openaitest.ToolCall{ID: "c", Name: "f", Args: "{}"}), subagent.Completed},
		{openaitest.Step{Text: "a", Finish: "length"}, subagent.MaxTokens},
		{openaitest.Step{Text: "a", Finish: "content_filter"}, subagent.Refusal},
		{openaitest.Step{Refusal: "I can't help with that."}, subagent.Refusal},
	}
	var steps []openaitest.Step
	for _, c := range cases {
		steps = append(steps, c.step)
	}
	s := openaitest.NewServer(t, append(steps, openaitest.Step{Text: "a", Finish: "insufficient_system_resource"})...)
	c, _ := client(t, s)
	for _, tc := range cases {
		resp, err := c.Generate(testkit.Ctx(t), ask("hi"))
		if err != nil || resp.StopReason != tc.want {
			t.Errorf("finish %q refusal %q: got %q, %v; want %q", tc.step.Finish, tc.step.Refusal, resp.StopReason, err, tc.want)
		}
		if tc.step.Refusal != "" && subagent.TextOf(resp.Message.Content) != tc.step.Refusal {
			t.Errorf("refusal text %q", subagent.TextOf(resp.Message.Content))
		}
	}
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var perr *openai.ProtocolError
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "insufficient_system_resource") {
		t.Errorf("unknown finish reason: %v", err)
	}
}

func TestK3_HostileToolCallArgumentsComeBackAsIs(t *testing.T) {
	hostile := []string{`{"path": `, `"../../etc/passwd`, "\x00\u202e", `}}}]`}
	// A raw stream no honest server sends: a huge and a negative index,
	// calls without ids, arguments that never form JSON.
	raw := "data: " + `{"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1000000000000,"function":{"name":"a","arguments":"{{"}}]}}]}` + "\n\n" +
		"data: " + `{"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":-5,"function":{"name":"b","arguments":"nul"}}]}}]}` + "\n\n" +
		"data: " + `{"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	s := openaitest.NewServer(t,
		openaitest.Calls(openaitest.ToolCall{ID: "call_1", Name: "list", Pieces: hostile}),
		openaitest.Step{Malformed: true, Body: raw},
	)
	c, _ := client(t, s)
	resp, err := c.Generate(testkit.Ctx(t), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Message.ToolCalls[0].Args), strings.Join(hostile, ""); got != want {
		t.Errorf("args %q, want %q as they came", got, want)
	}

	resp, err = c.Generate(testkit.Ctx(t), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "a" || string(calls[0].Args) != "{{" || calls[1].Name != "b" ||
		string(calls[1].Args) != "nul" || calls[0].ID == "" || calls[1].ID == "" || calls[0].ID == calls[1].ID {
		t.Errorf("calls %+v", calls)
	}
}

func TestM1_ConcurrentCallsShareOneClient(t *testing.T) {
	hold := openaitest.Step{Text: "x", Hold: true}
	s := openaitest.NewServer(t, hold, hold, hold)
	c, _ := client(t, s)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Generate(testkit.Ctx(t), ask("hi"))
			errs <- err
		}()
	}
	s.WaitInFlight(t, 3)
	s.Release()
	for i := range 3 {
		if err := testkit.Recv(t, errs, "concurrent Generate "+string(rune('1'+i))); err != nil {
			t.Error(err)
		}
	}
	if s.Peak() != 3 {
		t.Errorf("peak %d", s.Peak())
	}
}

func TestM1_NewValidatesConfig(t *testing.T) {
	if _, err := openai.New(openai.Config{}); !errors.Is(err, openai.ErrNoModel) {
		t.Errorf("no model: %v", err)
	}
	for _, u := range []string{"api.openai.com/v1", "ftp://x/v1", "http://"} {
		if _, err := openai.New(openai.Config{Model: "m", BaseURL: u}); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
	if _, err := openai.New(openai.Config{Model: "m", OutputSchema: "xml"}); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("OutputSchema xml: %v", err)
	}
	c, err := openai.New(openai.Config{Model: "m"})
	if err != nil || c.Model() != "m" {
		t.Errorf("defaults: %v", err)
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestM1_FromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  func(string) string
		ok   bool
		want openai.Config
	}{
		{"nothing", env(), false, openai.Config{}},
		{"openai key", env("OPENAI_API_KEY", "sk-1"), true,
			openai.Config{BaseURL: openai.OpenAIBaseURL, APIKey: "sk-1", Model: openai.DefaultOpenAIModel}},
		{"openai key and model", env("OPENAI_API_KEY", "sk-1", "OPENAI_MODEL", "gpt-5"), true,
			openai.Config{BaseURL: openai.OpenAIBaseURL, APIKey: "sk-1", Model: "gpt-5"}},
		{"local server without key", env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1", "OPENAI_MODEL", "qwen3"), true,
			openai.Config{BaseURL: "http://127.0.0.1:8080/v1", Model: "qwen3"}},
		{"deepseek alone", env("DEEPSEEK_API_KEY", "ds-1"), true,
			openai.Config{BaseURL: openai.DeepSeekBaseURL, APIKey: "ds-1", Model: openai.DefaultDeepSeekModel, OutputSchema: "json_object"}},
		{"deepseek with model", env("DEEPSEEK_API_KEY", "ds-1", "OPENAI_MODEL", "deepseek-reasoner"), true,
			openai.Config{BaseURL: openai.DeepSeekBaseURL, APIKey: "ds-1", Model: "deepseek-reasoner", OutputSchema: "json_object"}},
		{"openai wins over deepseek", env("DEEPSEEK_API_KEY", "ds-1", "OPENAI_API_KEY", "sk-1"), true,
			openai.Config{BaseURL: openai.OpenAIBaseURL, APIKey: "sk-1", Model: openai.DefaultOpenAIModel}},
		{"base URL wins over deepseek", env("DEEPSEEK_API_KEY", "ds-1", "OPENAI_BASE_URL", "http://h/v1", "OPENAI_MODEL", "m"), true,
			openai.Config{BaseURL: "http://h/v1", Model: "m"}},
	}
	for _, tc := range cases {
		got, ok := openai.FromEnv(tc.env)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestM1_FromEnvReachesTheServer(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("from env"))
	cfg, ok := openai.FromEnv(env("OPENAI_BASE_URL", s.URL, "OPENAI_API_KEY", "sk-env", "OPENAI_MODEL", "env-model"))
	if !ok {
		t.Fatal("not configured")
	}
	cfg.HTTPClient = s.Client()
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(testkit.Ctx(t), ask("hi")); err != nil {
		t.Fatal(err)
	}
	if r := s.WaitFinished(t, 1)[0]; r.Model != "env-model" || r.Authorization != "Bearer sk-env" {
		t.Errorf("request %+v", r)
	}
}

func TestM1_EndpointsLookup(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("a"), openaitest.Reply("b"))
	eps := openai.Endpoints{
		"local": {BaseURL: s.URL, Model: "small", Models: []string{"small", "large"}, HTTPClient: s.Client()},
		"any":   {BaseURL: s.URL, Model: "x", HTTPClient: s.Client()},
	}
	_, err := eps.Lookup("nowhere", "")
	var unknown *openai.UnknownEndpointError
	if !errors.As(err, &unknown) || unknown.Provider != "nowhere" || !reflect.DeepEqual(unknown.Known, []string{"any", "local"}) {
		t.Errorf("unknown endpoint: %v", err)
	}
	_, err = eps.Lookup("local", "huge")
	var unknownModel *openai.UnknownModelError
	if !errors.As(err, &unknownModel) || unknownModel.Model != "huge" {
		t.Errorf("unknown model: %v", err)
	}
	for _, lk := range []struct{ provider, model, want string }{{"local", "large", "large"}, {"any", "", "x"}} {
		m, err := eps.Lookup(lk.provider, lk.model)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(testkit.Ctx(t), ask("hi")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.WaitFinished(t, 2)
	if reqs[0].Model != "large" || reqs[1].Model != "x" {
		t.Errorf("models %q %q", reqs[0].Model, reqs[1].Model)
	}
}

func TestM1_BadRequestInputFailsBeforeSending(t *testing.T) {
	s := openaitest.NewServer(t)
	c, _ := client(t, s)
	bad := []agent.Request{
		{Messages: []agent.Message{{Role: "wizard"}}},
		{Tools: []agent.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{`)}}},
		{OutputSchema: json.RawMessage(`[1]`)},
	}
	for i, req := range bad {
		if _, err := c.Generate(testkit.Ctx(t), req); err == nil {
			t.Errorf("request %d accepted", i)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
