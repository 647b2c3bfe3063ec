// Package agentlog holds the agent loop's log-only records that other
// packages of this module read or write too: the activation marker that
// takes a session's log and the stop record an activation ends with.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package agentlog

import "github.com/subactor/subactor/subagent"

// KindActivation is the log-only record an agent resuming a session
// appends first: it takes the log, so that an earlier activation still
// holding it fails its next append with persistence.ErrConflict instead
// of interleaving its turns with this one's (S8: one writer at a time).
const KindActivation = "agent/activation"

// KindStop marks the log-only record an activation ends with: how it
// stopped, so that a session can be listed with its state without
// replaying it (see Stop).
const KindStop = "agent/stop"

// Stop is the data of a KindStop record.
type Stop struct {
	StopReason subagent.StopReason `json:"stopReason"`
	Detail     string              `json:"detail,omitempty"`
	Usage      *subagent.Usage     `json:"usage,omitempty"`
	// Output is the final answer of a child whose turns live elsewhere
	// (an ACP agent's own session), so that it can be read again (S9); an
	// in-process child's is its last turn, in the same append.
	Output []subagent.ContentBlock `json:"output,omitempty"`
}
