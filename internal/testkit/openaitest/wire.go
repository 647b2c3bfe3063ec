package openaitest

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Request is one recorded chat request, decoded.
type Request struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// MaxTokens is max_tokens, or max_completion_tokens when only that
	// was sent.
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`

	// Set by the server, not decoded.
	Authorization string          `json:"authorization,omitempty"` // the header as sent
	Raw           json.RawMessage `json:"raw,omitempty"`           // the body as sent
	Step          int             `json:"step"`                    // the script step that answered (a responder's: the answer's number); -1: none
	// Cancelled says the client went away (the request's context ended)
	// before the server had written all of its answer.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Message is a request message. Content stays raw: a string, an array of
// content parts, or null.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []WireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// Text is the message's text: the content string, or its text parts
// joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts) // anything else has no text
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// WireToolCall is a tool call as the chat API writes it.
type WireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

// ResponseFormat is a request's response_format.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema,omitempty"`
		Strict *bool           `json:"strict,omitempty"`
	} `json:"json_schema,omitempty"`
}

// StreamOptions is a request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// decodeRequest decodes body; a body that is not a JSON object leaves only
// Raw set.
func decodeRequest(body []byte) (Request, error) {
	var wire struct {
		Request
		MaxCompletionTokens int `json:"max_completion_tokens"`
	}
	err := json.Unmarshal(body, &wire)
	req := wire.Request
	if err != nil {
		req = Request{}
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = wire.MaxCompletionTokens
	}
	req.Raw = json.RawMessage(body)
	if !json.Valid(body) {
		req.Raw, _ = json.Marshal(string(body)) // keep it printable as JSON
	}
	return req, err
}

// The reply side.

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (s Step) usage() wireUsage {
	var u wireUsage
	if s.Usage != nil {
		u.PromptTokens = s.Usage.PromptTokens
		u.CompletionTokens = s.Usage.CompletionTokens
		u.PromptTokensDetails.CachedTokens = s.Usage.CachedTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

type wireCallDelta struct {
	Index    int     `json:"index"`
	ID       string  `json:"id,omitempty"`
	Type     string  `json:"type,omitempty"`
	Function wireFun `json:"function"`
}

type wireFun struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []wireCallDelta `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *wireUsage    `json:"usage,omitempty"`
}

// chunks returns the streamed deltas of s: the role, then the pieces, then
// the finish reason (and usage when asked) in chunks of their own.
func (s Step) chunks(id, model string, includeUsage bool) []chunk {
	mk := func(d delta) chunk {
		return chunk{ID: id, Object: "chat.completion.chunk", Model: model, Choices: []chunkChoice{{Delta: d}}}
	}
	out := []chunk{mk(delta{Role: "assistant"})}
	var text []delta
	for _, p := range split(s.Text, s.ChunkSize) {
		text = append(text, delta{Content: &p})
	}
	for _, p := range split(s.Refusal, s.ChunkSize) {
		text = append(text, delta{Refusal: &p})
	}
	seqs := [][]delta{text}
	for i, c := range s.ToolCalls {
		pieces := c.Pieces
		if pieces == nil {
			pieces = split(c.Args, s.ChunkSize)
		}
		seq := []delta{{ToolCalls: []wireCallDelta{{Index: i, ID: c.ID, Type: "function", Function: wireFun{Name: c.Name}}}}}
		for _, p := range pieces {
			seq = append(seq, delta{ToolCalls: []wireCallDelta{{Index: i, Function: wireFun{Arguments: p}}}})
		}
		seqs = append(seqs, seq)
	}
	if s.Interleave {
		for n, more := 0, true; more; n++ {
			more = false
			for _, seq := range seqs {
				if n < len(seq) {
					out, more = append(out, mk(seq[n])), true
				}
			}
		}
	} else {
		for _, seq := range seqs {
			for _, d := range seq {
				out = append(out, mk(d))
			}
		}
	}
	finish := s.finish()
	last := mk(delta{})
	last.Choices[0].FinishReason = &finish
	out = append(out, last)
	if includeUsage {
		u := s.usage()
		out = append(out, chunk{ID: id, Object: "chat.completion.chunk", Model: model, Choices: []chunkChoice{}, Usage: &u})
	}
	return out
}

// completion is the non-streamed reply of s.
func (s Step) completion(id, model string) any {
	type message struct {
		Role      string         `json:"role"`
		Content   *string        `json:"content"`
		Refusal   *string        `json:"refusal"`
		ToolCalls []WireToolCall `json:"tool_calls,omitempty"`
	}
	m := message{Role: "assistant"}
	if s.Text != "" || len(s.ToolCalls) == 0 {
		m.Content = &s.Text
	}
	if s.Refusal != "" {
		m.Refusal = &s.Refusal
	}
	for _, c := range s.ToolCalls {
		w := WireToolCall{ID: c.ID, Type: "function"}
		w.Function.Name, w.Function.Arguments = c.Name, c.args()
		m.ToolCalls = append(m.ToolCalls, w)
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	return struct {
		ID      string    `json:"id"`
		Object  string    `json:"object"`
		Created int64     `json:"created"`
		Model   string    `json:"model"`
		Choices []choice  `json:"choices"`
		Usage   wireUsage `json:"usage"`
	}{id, "chat.completion", 0, model, []choice{{Message: m, FinishReason: s.finish()}}, s.usage()}
}

// split cuts s into pieces of at most n bytes without splitting a rune (a
// rune longer than n is a piece of its own); n <= 0 keeps s whole. An empty
// s has no pieces.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// errorBody is the JSON error object OpenAI answers with.
func errorBody(message, typ string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": nil}})
	return string(b)
}
