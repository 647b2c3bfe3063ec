package openaitest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body to the chat route with the server's own client.
func post(t *testing.T, ctx context.Context, s *openaitest.Server, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	return s.Client().Do(req)
}

// events reads an SSE body: the data of every event, [DONE] included.
func events(t *testing.T, body io.Reader) ([]string, error) {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, data)
		}
	}
	return out, sc.Err()
}

type wireChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func streamed(t *testing.T, s *openaitest.Server, body string) []wireChunk {
	t.Helper()
	resp, err := post(t, testkit.Ctx(t), s, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	data, err := events(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", data)
	}
	var out []wireChunk
	for _, d := range data[:len(data)-1] {
		var c wireChunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", c.Object)
		}
		out = append(out, c)
	}
	return out
}

const streamReq = `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`

func TestStreamedReplyChunksTextToolArgsFinishAndUsage(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{
		Text:      "héllo world",
		ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "list", Args: `{"path":"."}`}},
		ChunkSize: 4,
		Usage:     &openaitest.Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 3},
	})
	chunks := streamed(t, s, streamReq)
	if chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk has no role: %+v", chunks[0])
	}
	var text, args strings.Builder
	var argChunks int
	var finish string
	for _, c := range chunks {
		if c.Model != "m1" {
			t.Errorf("chunk model %q, want the requested one", c.Model)
		}
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if d.Content != nil {
			text.WriteString(*d.Content)
		}
		for _, tc := range d.ToolCalls {
			if tc.ID != "" && (tc.ID != "call_1" || tc.Function.Name != "list" || tc.Type != "function") {
				t.Errorf("tool call header %+v", tc)
			}
			if tc.Function.Arguments != "" {
				argChunks++
			}
			args.WriteString(tc.Function.Arguments)
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if text.String() != "héllo world" || args.String() != `{"path":"."}` {
		t.Errorf("reassembled %q and %q", text.String(), args.String())
	}
	if argChunks < 3 {
		t.Errorf("arguments came in %d chunks, want several", argChunks)
	}
	if finish != "tool_calls" {
		t.Errorf("finish %q", finish)
	}
	last := chunks[len(chunks)-1]
	if last.Usage == nil || len(last.Choices) != 0 || last.Usage.PromptTokens != 10 ||
		last.Usage.CompletionTokens != 5 || last.Usage.PromptTokensDetails.CachedTokens != 3 {
		t.Errorf("usage chunk %+v", last)
	}
}

func TestStreamedUsageOnlyWhenAsked(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("x"))
	for _, c := range streamed(t, s, `{"model":"m","stream":true,"messages":[]}`) {
		if c.Usage != nil {
			t.Errorf("usage without include_usage: %+v", c)
		}
	}
}

func TestStreamedInterleavedDeltas(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{
		Text:       "abcdef",
		ChunkSize:  2,
		Interleave: true,
		ToolCalls: []openaitest.ToolCall{
			{ID: "a", Name: "f", Pieces: []string{`{"x"`, `:1}`}},
			{ID: "b", Name: "g", Pieces: []string{`{}`}},
		},
	})
	var kinds []string
	for _, c := range streamed(t, s, streamReq) {
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		switch {
		case d.Content != nil:
			kinds = append(kinds, "text")
		case len(d.ToolCalls) > 0:
			kinds = append(kinds, "call"+string(rune('0'+d.ToolCalls[0].Index)))
		}
	}
	want := "text call0 call1 text call0 call1 text call0"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("delta order %q, want %q", got, want)
	}
}

func TestNonStreamedReply(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{
		ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "f", Pieces: []string{`{"a"`, `:2}`}}},
		Usage:     &openaitest.Usage{PromptTokens: 7, CompletionTokens: 2, CachedTokens: 1},
	})
	resp, err := post(t, testkit.Ctx(t), s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role      string                    `json:"role"`
				Content   *string                   `json:"content"`
				ToolCalls []openaitest.WireToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	m := got.Choices[0].Message
	if got.Object != "chat.completion" || m.Role != "assistant" || m.Content != nil || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Arguments != `{"a":2}` || got.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion %+v", got)
	}
	if got.Usage.PromptTokens != 7 || got.Usage.CompletionTokens != 2 || got.Usage.PromptTokensDetails.CachedTokens != 1 {
		t.Errorf("usage %+v", got.Usage)
	}
}

func TestFinishReasons(t *testing.T) {
	reasons := []string{"stop", "length", "content_filter", "tool_calls"}
	var steps []openaitest.Step
	for _, r := range reasons {
		steps = append(steps, openaitest.Step{Text: "x", Finish: r})
	}
	s := openaitest.NewServer(t, steps...)
	for _, want := range reasons {
		var got string
		for _, c := range streamed(t, s, streamReq) {
			if len(c.Choices) > 0 && c.Choices[0].FinishReason != nil {
				got = *c.Choices[0].FinishReason
			}
		}
		if got != want {
			t.Errorf("finish %q, want %q", got, want)
		}
	}
}

func TestStatusFaultWithRetryAfter(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Status(429, "3"), openaitest.Step{Status: 503, Body: "overloaded"})
	resp, err := post(t, testkit.Ctx(t), s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(string(body), `"error"`) {
		t.Errorf("got %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, err = post(t, testkit.Ctx(t), s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "overloaded" || resp.Header.Get("Retry-After") != "" {
		t.Errorf("got %d %s", resp.StatusCode, body)
	}
}

func TestMalformedBody(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Malformed(), openaitest.Malformed())
	for _, body := range []string{streamReq, `{"model":"m","messages":[]}`} {
		resp, err := post(t, testkit.Ctx(t), s, body)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		payload, _ := strings.CutPrefix(strings.TrimSpace(string(data)), "data: ")
		if resp.StatusCode != 200 || json.Valid([]byte(payload)) {
			t.Errorf("got %d %q, want 200 and invalid JSON", resp.StatusCode, data)
		}
	}
}

func TestDropMidStream(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Drop(openaitest.Step{Text: "abcdef", ChunkSize: 1}, 3))
	resp, err := post(t, testkit.Ctx(t), s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := events(t, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	if len(data) != 3 {
		t.Errorf("got %d events before the drop, want 3", len(data))
	}
}

func TestStallRecordsClientCancellation(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Stall(openaitest.Reply("abc"), 1))
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	resp, err := post(t, ctx, s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The role chunk arrives, then nothing until we cancel.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	s.WaitStalled(t, 1)
	cancel()
	reqs := s.WaitFinished(t, 1)
	if !reqs[0].Cancelled {
		t.Error("server did not record the cancellation")
	}
}

func TestRecordsRequests(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("ok"), openaitest.Reply("ok"))
	body := `{"model":"gpt-x","stream":true,"max_tokens":99,
		"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"res"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
		"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":false}}}`
	streamed(t, s, body)
	resp, err := post(t, testkit.Ctx(t), s, `{"model":"m","max_completion_tokens":5,"messages":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := s.WaitFinished(t, 2)
	r := reqs[0]
	if r.Model != "gpt-x" || !r.Stream || r.MaxTokens != 99 || r.Authorization != "Bearer sk-test" || r.Step != 0 || r.Cancelled {
		t.Errorf("recorded %+v", r)
	}
	if len(r.Messages) != 4 || r.Messages[0].Text() != "sys" || r.Messages[1].Text() != "ab" ||
		r.Messages[2].ToolCalls[0].ID != "c1" || r.Messages[3].ToolCallID != "c1" || r.Messages[3].Text() != "res" {
		t.Errorf("messages %+v", r.Messages)
	}
	if len(r.Tools) != 1 || r.Tools[0].Function.Name != "f" || string(r.Tools[0].Function.Parameters) != `{"type":"object"}` {
		t.Errorf("tools %+v", r.Tools)
	}
	rf := r.ResponseFormat
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema.Name != "out" || string(rf.JSONSchema.Schema) != `{"type":"object"}` ||
		rf.JSONSchema.Strict == nil || *rf.JSONSchema.Strict {
		t.Errorf("response format %+v", rf)
	}
	if reqs[1].MaxTokens != 5 || reqs[1].Stream {
		t.Errorf("second request %+v", reqs[1])
	}
	if s.Remaining() != 0 {
		t.Errorf("%d steps left", s.Remaining())
	}
}

func TestBadRequestBodyIs400(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Reply("not taken"))
	resp, err := post(t, testkit.Ctx(t), s, `{"model":`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if r := s.WaitFinished(t, 1)[0]; r.Step != -1 || string(r.Raw) != `"{\"model\":"` || s.Remaining() != 1 {
		t.Errorf("recorded %+v", r)
	}
}

func TestPeakInFlight(t *testing.T) {
	hold := openaitest.Step{Text: "x", Hold: true}
	s := openaitest.NewServer(t, hold, hold, hold)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := post(t, testkit.Ctx(t), s, streamReq)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	s.WaitInFlight(t, 3)
	s.Release()
	wg.Wait()
	if p := s.Peak(); p != 3 {
		t.Errorf("peak %d, want 3", p)
	}
}

func TestListsModels(t *testing.T) {
	s := openaitest.NewServer(t)
	resp, err := s.Client().Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != openaitest.DefaultModel {
		t.Errorf("models %+v", list)
	}
}

func TestListenRecordsJSONLines(t *testing.T) {
	var rec syncBuffer
	s, err := openaitest.Listen("127.0.0.1:0", openaitest.Script{Models: []string{"a", "b"}, Steps: []openaitest.Step{openaitest.Reply("x")}}, &rec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	streamed(t, s, streamReq)
	s.WaitFinished(t, 1)
	var r openaitest.Request
	if err := json.Unmarshal(bytes.TrimSpace(rec.Bytes()), &r); err != nil || r.Model != "m1" {
		t.Errorf("record %q: %v", rec.Bytes(), err)
	}
}

func TestInvalidStepRejected(t *testing.T) {
	if _, err := openaitest.Listen("127.0.0.1:0", openaitest.Script{Steps: []openaitest.Step{{Status: 200}}}, nil); err == nil {
		t.Error("a 200 fault step was accepted")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

// A responder answers each request from what it holds, concurrently, and
// numbers the answers in arrival order.
func TestResponderAnswersFromTheRequest(t *testing.T) {
	s := openaitest.NewResponder(t, func(r openaitest.Request) openaitest.Step {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Reply("result of " + last.ToolCallID + ": " + last.Text())
		}
		return openaitest.Calls(openaitest.ToolCall{ID: "c-" + last.Text(), Name: "echo", Args: `{}`})
	})
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, body := range []string{
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","tool_calls":[{"id":"c-hi","type":"function","function":{"name":"echo","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c-hi","content":"HI"}]}`,
	} {
		wg.Go(func() {
			for _, c := range streamed(t, s, body) {
				for _, ch := range c.Choices {
					if ch.Delta.Content != nil {
						got[i] += *ch.Delta.Content
					}
					for _, tc := range ch.Delta.ToolCalls {
						if tc.ID != "" { // the first piece of a call
							got[i] += tc.ID + " " + tc.Function.Name
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if got[0] != "c-hi echo" || got[1] != "result of c-hi: HI" {
		t.Errorf("answers %q", got)
	}
	steps := map[int]bool{}
	for _, r := range s.WaitFinished(t, 2) {
		steps[r.Step] = true
	}
	if !steps[0] || !steps[1] || s.Remaining() != 0 {
		t.Errorf("answers numbered %v, %d steps left", steps, s.Remaining())
	}
}
