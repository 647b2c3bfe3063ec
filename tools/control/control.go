// Package control holds send_message (T2): the model-facing follow-up to a
// continuable child by its id. It steers the child's live activation, or
// starts a new one resumed from the child's log with the message as its
// prompt; either way the model gets the route and, for a start, the task
// to collect with task_output.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/subagent"
)

// name is the tool's name.
const name = "send_message"

// Default limits of the model-supplied arguments (K3).
const (
	defaultMessageLimit = 64 << 10 // runes
	maxChildID          = 64       // bytes: child ids are UUIDs
)

// ErrArgs is matched by every argument error.
var ErrArgs = errors.New("control: invalid arguments")

// Config configures the tool.
type Config struct {
	// Service delivers the messages to continuable children.
	Service *registry.Service
	// MessageLimit bounds the message in runes; 64 Ki when 0.
	MessageLimit int
}

// tool is send_message.
type tool struct{ cfg Config }

// New returns send_message.
func New(cfg Config) agent.Tool {
	if cfg.MessageLimit <= 0 {
		cfg.MessageLimit = defaultMessageLimit
	}
	return &tool{cfg: cfg}
}

// answer is the tool's result.
type answer struct {
	Route  registry.Route `json:"route"`            // "steered" or "started"
	TaskID string         `json:"taskId,omitempty"` // the new activation's task, when started
}

// Spec implements agent.Tool.
func (t *tool) Spec() agent.ToolSpec {
	return agent.ToolSpec{
		Name:        name,
		Description: "Send a follow-up message to a continuable child by its subagent id: it joins the child's work if it is running, or resumes the child with it.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"subagent_id":{"type":"string","maxLength":%d,"description":"The child's id, as a continuable delegation answered."},`+
			`"message":{"type":"string","maxLength":%d,"description":"The follow-up for the child."}},`+
			`"required":["subagent_id","message"],"additionalProperties":false}`, maxChildID, t.cfg.MessageLimit)),
	}
}

// Call implements agent.Tool.
func (t *tool) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	if caller == nil {
		return "", &subagent.InvalidRequestError{Field: "parent", Reason: "a delegating parent agent is required"}
	}
	var a struct {
		ChildID string `json:"subagent_id"`
		Message string `json:"message"`
	}
	if err := jsonv2.Unmarshal(raw, &a); err != nil {
		return "", fmt.Errorf("%w: %w", ErrArgs, err)
	}
	switch n := utf8.RuneCountInString(a.Message); {
	case a.ChildID == "" || len(a.ChildID) > maxChildID:
		return "", fmt.Errorf("%w: subagent_id must have 1 to %d bytes", ErrArgs, maxChildID)
	case strings.TrimSpace(a.Message) == "":
		return "", fmt.Errorf("%w: message is required", ErrArgs)
	case n > t.cfg.MessageLimit:
		return "", fmt.Errorf("%w: message has %d characters, over its limit of %d", ErrArgs, n, t.cfg.MessageLimit)
	}
	// The calling agent is the follow-up's source (attribution only: the
	// Service checks that it owns the child).
	d, err := t.cfg.Service.SendMessage(ctx, caller, a.ChildID, []subagent.ContentBlock{subagent.Text(a.Message)}, "agent:"+caller.SessionID())
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(answer{Route: d.Route, TaskID: d.Task.ID})
	return string(out), err
}
