package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// reply reassembles a streamed answer from its chunks. Only choice 0
// counts: we never ask for more than one.
type reply struct {
	limit   int // bytes of chunk data accepted
	size    int
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

func newReply(limit int, onText func(string)) *reply {
	return &reply{limit: limit, byIndex: map[int64]*partialCall{}, onText: onText}
}

// add folds one chunk in.
func (r *reply) add(c sdk.ChatCompletionChunk) error {
	r.size += len(c.RawJSON())
	if r.size > r.limit {
		return &ProtocolError{Detail: fmt.Sprintf("answer over %d bytes", r.limit)}
	}
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
	return nil
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
		return resp, &ProtocolError{Detail: "stream ended without a finish reason"}
	default:
		// DeepSeek's insufficient_system_resource and the like: the answer
		// was not finished, and no stop reason of ours says why.
		return resp, &ProtocolError{Detail: fmt.Sprintf("unknown finish reason %q", r.finish)}
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
		resp.Usage = subagent.Usage{
			InputTokens:       int(r.usage.PromptTokens),
			OutputTokens:      int(r.usage.CompletionTokens),
			CachedInputTokens: int(r.usage.PromptTokensDetails.CachedTokens),
		}
	}
	return resp, nil
}
