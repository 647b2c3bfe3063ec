package subagent

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// StartRequest asks a provider for a child.
type StartRequest struct {
	Prompt []ContentBlock
	// Parent is the delegating agent; required.
	Parent  Agent
	Options AgentOptions
	// OutputSchema, when set, is an object-rooted JSON Schema the child's
	// final answer must satisfy (capability OutputSchema).
	OutputSchema json.RawMessage
	// MaxDepth is an absolute delegation depth cap, counted from the
	// top-level agent (depth 0), as in D6: an agent at depth d may not
	// delegate when d >= MaxDepth, so 0 forbids the parent itself to
	// delegate and a child of a top-level parent needs at least 1
	// (capability DepthLimit).
	MaxDepth *int
	// ToolFilter restricts the child's tools (capability ToolFilter).
	ToolFilter *ToolFilter
	// Persona becomes the child's system prompt (capability Persona).
	Persona *string
	// Continuation resumes a durable child; only with Service.Resume.
	Continuation *Continuation
}

// Scope is what the Service hands a provider's Start or Resume about the
// run it asks for. A caller other than the Service passes the zero Scope:
// the run then mints its own id and emits no progress.
type Scope struct {
	// RunID is minted by the Service; the provider's Run reports it as
	// its ID (a fresh local child also takes it as its session id).
	RunID string
	// Parent is the delegating parent as a plain value.
	Parent ParentRef
	// Events receives the run's progress; nil when nobody can hear it
	// (no one had subscribed to the parent's runs when it started), so a
	// provider need not build events.
	Events EventSink
	// Restarts is the embedder's policy for relaunching a continuable
	// run's child after a crash; a run without a checkpoint to relaunch
	// from settles error instead.
	Restarts RestartPolicy
	// Continuable marks the first activation of a continuable child
	// (S7): its provider stores the child's creation before Start
	// returns, since follow-ups resume the child from it. Any other
	// child's provider may leave that to the child's first turn.
	Continuable bool
	// Cancel, when set, cancels the context the Service handed Start or
	// Resume (and only that one): a run whose one child is all that runs
	// under that context may run the child under it and cancel the child
	// with Cancel, rather than derive a context of its own. Nil from a
	// caller other than the Service.
	Cancel context.CancelCauseFunc
}

// RestartPolicy is how often a continuable run's child may be relaunched
// from its last checkpoint after a crash (A2): at most Max relaunches
// within any Window. The zero policy never relaunches.
type RestartPolicy struct {
	Max    int
	Window time.Duration
}

// ParentRef names a delegating parent as a plain, serialisable value.
type ParentRef struct {
	SessionID string
	Depth     int // its delegation depth (D6)
}

// AgentOptions configure a child agent.
type AgentOptions struct {
	ModelProvider string `json:"modelProvider,omitempty"`
	Model         string `json:"model,omitempty"`
	MaxTokens     int    `json:"maxTokens,omitempty"`
	// SubagentDepth is the agent's delegation depth as an option (D6).
	SubagentDepth int `json:"subagentDepth,omitempty"`
	// MaxDepth, when set, is the delegation cap the agent inherited.
	MaxDepth *int `json:"maxDepth,omitempty"`
}

// ToolFilter restricts a child's tool set by name: when Allow is non-empty
// only those tools remain; Deny removes tools.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Apply reports whether the tool named name passes the filter.
func (f *ToolFilter) Apply(name string) bool {
	if f == nil {
		return true
	}
	return !slices.Contains(f.Deny, name) && (len(f.Allow) == 0 || slices.Contains(f.Allow, name))
}

// Continuation names a durable child to resume.
type Continuation struct {
	SessionID  string
	Descriptor json.RawMessage
}
