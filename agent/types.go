package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/subactor/subactor/subagent"
)

// Role says who wrote a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
	ToolRole  Role = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	Role       Role                    `json:"role"`
	Content    []subagent.ContentBlock `json:"content,omitempty"`
	ToolCalls  []ToolCall              `json:"toolCalls,omitempty"`
	ToolCallID string                  `json:"toolCallId,omitempty"` // on a tool result
	IsError    bool                    `json:"isError,omitempty"`    // on a tool result
}

// ToolCall is the model asking for a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments
}

// Request is what the model sees for one step.
type Request struct {
	System string
	// Messages is the history, shared with the loop: read it, never
	// change its elements (appending to the slice is safe).
	Messages []Message
	// Tools are the tools offered; like Messages, shared with the loop
	// (and with other requests that offer the same): read it, never
	// change its elements.
	Tools        []ToolSpec
	MaxTokens    int
	OutputSchema json.RawMessage
	// OnText, when set, is given the answer's text as a streaming model
	// produces it, piece by piece (live progress, E6), on the goroutine
	// that called Generate and before Generate returns. A model that does
	// not stream may ignore it. It must not block.
	OnText func(delta string)
	// OnRetry, when set, is told of each failed attempt of this call that
	// a model retries, before it waits for the next: the attempt's number
	// (1-based), its error and the wait. Like OnText, it is called on the
	// goroutine that called Generate and must not block.
	OnRetry func(attempt int, err error, wait time.Duration)
}

// Response is the model's answer for one step. A Message without tool calls
// is the final answer.
type Response struct {
	Message Message
	// StopReason is Completed for a normal answer or a tool-calling step;
	// MaxTokens or Refusal end the run with that reason.
	StopReason subagent.StopReason
	Usage      subagent.Usage
}

// Model produces the next assistant message.
type Model interface {
	Generate(ctx context.Context, req Request) (Response, error)
}

// Tool is something the model can call. A returned error reaches the model
// as an error tool result; it does not end the run.
type Tool interface {
	Spec() ToolSpec
	Call(ctx context.Context, caller *Agent, args json.RawMessage) (string, error)
}

// Recoverer is a Tool whose calls can outlive the process that made them:
// the delegate tool, whose child keeps a session of its own (S9). When a
// Run continues a history whose last turn has calls without results (the
// process died while they ran), the loop asks a Recoverer's Recover for
// each of its calls, with the call's CallRef in ctx, instead of answering
// it as interrupted. Those calls run as a turn's calls do: concurrently
// within the parallel cap, their arguments checked, each result
// checkpointed as it arrives. Recover returns ErrInterrupted for a call it
// cannot recover.
type Recoverer interface {
	Tool
	Recover(ctx context.Context, caller *Agent, args json.RawMessage) (string, error)
}

// ErrInterrupted, from Recover, answers the call as interrupted, as a
// call of a tool that is no Recoverer is.
var ErrInterrupted = errors.New("agent: the call was interrupted and cannot be recovered")

// CallRef names a tool call for as long as its session lasts: the log
// record of the assistant turn that made it and its place among that
// turn's calls. The model's own call ids need not be unique; these are.
// A Tool finds it in its ctx (CallOf), in Call and in Recover alike, so
// that what a call leaves behind (a child's session) can be found again
// from the call alone.
type CallRef struct {
	Seq   uint64
	Index int
}

type callKey struct{}

// withCall is ctx carrying ref for the tool it is given to.
func withCall(ctx context.Context, ref CallRef) context.Context {
	return context.WithValue(ctx, callKey{}, ref)
}

// CallOf is the CallRef of the tool call ctx was given to; false outside
// a tool call of an Agent.
func CallOf(ctx context.Context) (CallRef, bool) {
	ref, ok := ctx.Value(callKey{}).(CallRef)
	return ref, ok
}

// Conditional is a Tool that is offered only while Available says so (the
// delegate tool hides itself at the depth cap).
type Conditional interface {
	Available(a *Agent) bool
}

// SteerSource hands the agent loop the steer messages admitted into the next
// model request. Take is called once before every model call; an error means
// the run may not make another request.
type SteerSource interface {
	Take(ctx context.Context) ([][]subagent.ContentBlock, error)
}

// Step is a progress notification from the loop; the run it belongs to
// turns it into a subagent.RunProgress event.
type Step struct {
	Agent   string
	N       int // 1-based model call
	Kind    subagent.ProgressKind
	Text    string          // see the kinds in package subagent
	IsError bool            // a tool call that failed
	Usage   *subagent.Usage // of the model call that finished
}
