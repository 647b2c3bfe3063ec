package openai

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// maxLine is the longest line the SDK's stream reader takes
// (ssestream.NewDecoder's scanner buffer).
const maxLine = bufio.MaxScanTokenSize << 9

// cappedBody is a streamed body read through the answer's size limits:
// past maxBody bytes in all, or maxEvent bytes in one event, Read fails
// with a *tooLargeError. The SDK's reader keeps an event's lines until the
// blank line that ends it, so without the event limit a stream of data
// lines without a blank line would grow memory without end.
type cappedBody struct {
	io.ReadCloser
	maxBody, maxEvent int
	body, event       int // bytes read in all, and since the last blank line
	line              lineState
	err               error
}

// lineState is where a cappedBody is in its line. Blank lines are the ones
// the SDK's reader sees as blank: it splits at "\n" and drops one "\r"
// before it.
type lineState uint8

const (
	lineStart lineState = iota // after a "\n", or at the start: a "\n" now ends a blank line
	lineCR                     // after "\n\r": a "\n" now ends a blank line too
	lineText                   // anything else
)

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for i, ch := range p[:n] {
		b.body++
		b.event++
		switch {
		case ch == '\n':
			if b.line != lineText {
				b.event = 0
			}
			b.line = lineStart
		case ch == '\r' && b.line == lineStart:
			b.line = lineCR
		default:
			b.line = lineText
		}
		switch {
		case b.body > b.maxBody:
			b.err = &tooLargeError{Limit: b.maxBody}
		case b.event > b.maxEvent:
			b.err = &tooLargeError{Event: true, Limit: b.maxEvent}
		default:
			continue
		}
		return i, b.err
	}
	return n, err
}

// reply reassembles a streamed answer from its chunks. Only choice 0
// counts: we never ask for more than one.
type reply struct {
	text    strings.Builder
	refusal strings.Builder
	calls   []*partialCall
	byIndex map[int64]*partialCall // the call each delta index last named
	finish  string
	usage   *sdk.CompletionUsage
	onText  func(string) // agent.Request.OnText, or nil
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func newReply(onText func(string)) *reply {
	return &reply{byIndex: map[int64]*partialCall{}, onText: onText}
}

// add folds one chunk in.
func (r *reply) add(c sdk.ChatCompletionChunk) {
	if c.JSON.Usage.Valid() {
		u := c.Usage
		r.usage = &u
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		r.text.WriteString(d.Content)
		if d.Content != "" && r.onText != nil {
			r.onText(d.Content)
		}
		r.refusal.WriteString(d.Refusal)
		for _, tc := range d.ToolCalls {
			r.addCall(tc)
		}
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
	}
}

// addCall folds in a tool-call delta: the first delta of a call carries
// its id and name, later ones pieces of its arguments, all under the same
// index. The index is a map key, never a slice position, so that a hostile
// index cannot make us allocate; a new id under a known index (some servers
// number every call 0) starts a new call.
func (r *reply) addCall(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	p, ok := r.byIndex[tc.Index]
	if !ok || (tc.ID != "" && p.id != "" && tc.ID != p.id) {
		p = &partialCall{}
		r.byIndex[tc.Index] = p
		r.calls = append(r.calls, p)
	}
	if p.id == "" {
		p.id = tc.ID
	}
	if p.name == "" {
		p.name = tc.Function.Name
	}
	p.args.WriteString(tc.Function.Arguments)
}

// response is the reassembled answer. A stream without a finish reason was
// cut off.
func (r *reply) response() (agent.Response, error) {
	var resp agent.Response
	switch r.finish {
	case "stop", "tool_calls", "function_call":
		resp.StopReason = subagent.Completed
	case "length":
		resp.StopReason = subagent.MaxTokens
	case "content_filter":
		resp.StopReason = subagent.Refusal
	case "":
		return resp, &protocolError{Detail: "stream ended without a finish reason"}
	default:
		// DeepSeek's insufficient_system_resource and the like: the answer
		// was not finished, and no stop reason of ours says why.
		return resp, &protocolError{Detail: fmt.Sprintf("unknown finish reason %q", r.finish)}
	}
	msg := agent.Message{Role: agent.Assistant}
	if s := r.text.String(); s != "" {
		msg.Content = append(msg.Content, subagent.Text(s))
	}
	if s := r.refusal.String(); s != "" {
		msg.Content = append(msg.Content, subagent.Text(s))
		resp.StopReason = subagent.Refusal
	}
	for i, p := range r.calls {
		id := p.id
		if id == "" {
			// The loop pairs results with calls by id, so every call needs one.
			id = fmt.Sprintf("call_%d", i)
		}
		// The arguments go back as they came, valid JSON or not: the agent
		// loop sanitises them and tells the model (K3).
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: id, Name: p.name, Args: json.RawMessage(p.args.String())})
	}
	resp.Message = msg
	if r.usage != nil {
		u := r.usage
		for _, n := range []struct {
			name  string
			count int64
		}{{"prompt_tokens", u.PromptTokens}, {"completion_tokens", u.CompletionTokens}, {"cached_tokens", u.PromptTokensDetails.CachedTokens}} {
			if n.count < 0 || n.count > maxTokenCount {
				return agent.Response{}, &protocolError{Detail: fmt.Sprintf("usage reports %s = %d, not a token count (0 to %d)", n.name, n.count, maxTokenCount)}
			}
		}
		resp.Usage = subagent.Usage{
			InputTokens:       int(u.PromptTokens),
			OutputTokens:      int(u.CompletionTokens),
			CachedInputTokens: int(u.PromptTokensDetails.CachedTokens),
		}
	}
	return resp, nil
}

// maxTokenCount bounds a token count in usage: far beyond any model's
// context, and within a 32-bit int.
const maxTokenCount = 1 << 30
