package openaitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Script is what a server follows: the models GET /v1/models lists and the
// steps chat requests take in turn. It is also the JSON format of the
// command's -script file.
type Script struct {
	Models []string `json:"models,omitempty"` // DefaultModel when empty
	Steps  []Step   `json:"steps"`
}

// DefaultModel is the model a server lists when its script names none.
const DefaultModel = "openaitest"

// Step is the answer to one chat request. It is a fault when Status,
// Malformed, Drop or Stall is set; otherwise a reply.
type Step struct {
	// Reply.
	Text      string     `json:"text,omitempty"`
	Refusal   string     `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Finish is the finish_reason: "stop", "tool_calls", "length",
	// "content_filter" or anything else a test needs. Empty means
	// "tool_calls" when there are tool calls, else "stop".
	Finish string `json:"finish,omitempty"`
	// Usage is reported in the reply (streamed: in a final chunk when the
	// request asked for stream_options.include_usage). Nil reports zeros.
	Usage *Usage `json:"usage,omitempty"`
	// ChunkSize splits text, refusal and tool arguments into pieces of at
	// most this many bytes (never inside a rune), one chunk each; 0 sends
	// each whole. Chunks are written back to back, without delays.
	ChunkSize int `json:"chunkSize,omitempty"`
	// Interleave sends the text and each tool call's pieces round-robin,
	// as no OpenAI server does but a client must still reassemble.
	Interleave bool `json:"interleave,omitempty"`

	// Fault: an HTTP error status with Body (a JSON error object when
	// empty) and, when set, a Retry-After header sent as is (seconds or an
	// HTTP date).
	Status     int    `json:"status,omitempty"`
	Body       string `json:"body,omitempty"`
	RetryAfter string `json:"retryAfter,omitempty"`
	// Fault: a 200 whose body is written as is: Body when set (a raw
	// stream a test crafts, hostile or broken), else a body (or first
	// chunk) that is not valid JSON.
	Malformed bool `json:"malformed,omitempty"`
	// Fault: the reply's first After chunks are sent, then the connection
	// is closed without finishing the response (Drop) or the server waits
	// until the client cancels the request (Stall).
	Drop  bool `json:"drop,omitempty"`
	Stall bool `json:"stall,omitempty"`
	After int  `json:"after,omitempty"`

	// Hold makes the request wait, before anything is written, until
	// Server.Release is called; tests use it to hold several requests in
	// flight at once.
	Hold bool `json:"hold,omitempty"`
}

// ToolCall is one tool call of a reply.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args is sent as the arguments string as is, valid JSON or not.
	Args string `json:"args"`
	// Pieces, when set, are the argument deltas sent instead of Args split
	// by ChunkSize; the reply's arguments are their concatenation.
	Pieces []string `json:"pieces,omitempty"`
}

// Usage is the token usage a reply reports.
type Usage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
	CachedTokens     int `json:"cachedTokens,omitempty"` // prompt_tokens_details.cached_tokens
}

// Reply is a step answering text.
func Reply(text string) Step { return Step{Text: text} }

// Calls is a step answering tool calls.
func Calls(calls ...ToolCall) Step { return Step{ToolCalls: calls} }

// Status is a fault step answering an HTTP status. A retryAfter of "" sends
// no Retry-After header.
func Status(code int, retryAfter string) Step { return Step{Status: code, RetryAfter: retryAfter} }

// Malformed is a fault step answering 200 with a body that is not JSON.
func Malformed() Step { return Step{Malformed: true} }

// Drop is a fault step that sends s's first after chunks and then closes
// the connection mid-response.
func Drop(s Step, after int) Step {
	s.Drop, s.After = true, after
	return s
}

// Stall is a fault step that sends s's first after chunks and then waits
// until the client cancels.
func Stall(s Step, after int) Step {
	s.Stall, s.After = true, after
	return s
}

// args returns the full arguments string of c.
func (c ToolCall) args() string {
	if c.Pieces == nil {
		return c.Args
	}
	return strings.Join(c.Pieces, "")
}

func (s Step) fault() bool { return s.Status != 0 || s.Malformed }

func (s Step) finish() string {
	switch {
	case s.Finish != "":
		return s.Finish
	case len(s.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func (s Step) validate() error {
	switch {
	case s.Status != 0 && (s.Status < 400 || s.Status > 599):
		return fmt.Errorf("status %d is not an error status", s.Status)
	case s.fault() && (s.Drop || s.Stall):
		return errors.New("a status or malformed step cannot also drop or stall")
	case s.Drop && s.Stall:
		return errors.New("a step cannot both drop and stall")
	case s.After < 0 || s.ChunkSize < 0:
		return errors.New("after and chunkSize must not be negative")
	}
	return nil
}

func validateSteps(steps []Step) error {
	for i, s := range steps {
		if err := s.validate(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// LoadScript reads a Script from a JSON file.
func LoadScript(name string) (Script, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return Script{}, err
	}
	var sc Script
	if err = json.Unmarshal(data, &sc); err == nil {
		err = validateSteps(sc.Steps)
	}
	if err != nil {
		return Script{}, fmt.Errorf("openaitest: script %s: %w", name, err)
	}
	return sc, nil
}
