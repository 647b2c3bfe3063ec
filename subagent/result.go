package subagent

import "encoding/json"

// StopReason says why a child stopped. Providers may add more.
type StopReason string

const (
	Completed StopReason = "completed"
	Aborted   StopReason = "aborted"
	Error     StopReason = "error"
	MaxTokens StopReason = "max-tokens"
	Refusal   StopReason = "refusal"
)

// Result is what a run settles to.
type Result struct {
	Output     []ContentBlock  `json:"output"`
	Structured json.RawMessage `json:"structured,omitempty"`
	StopReason StopReason      `json:"stopReason"`
	// Detail explains a non-completed stop (a validation message, a panic).
	Detail string `json:"detail,omitempty"`
	Usage  *Usage `json:"usage,omitempty"`
	// Cause is the error behind a non-completed stop where it is known in
	// this process, so that errors.Is(res.Cause, context.DeadlineExceeded)
	// tells a deadline from a cancel. It does not cross the wire.
	Cause error `json:"-"`
}

// Usage counts model tokens where known. A run's usage includes its
// children's, recursively (U1).
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// CachedInputTokens is the part of InputTokens the endpoint served
	// from its prompt cache, where it reports it.
	CachedInputTokens int `json:"cachedInputTokens,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CachedInputTokens += o.CachedInputTokens
}
