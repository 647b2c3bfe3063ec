// Package agentlog holds the agent loop's log-only records that other
// packages of this module read or write too: the activation marker that
// takes a session's log and the stop record an activation ends with.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package agentlog

import (
	"context"
	"encoding/json"

	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// KindActivation is the log-only record an agent resuming a session
// appends first: it takes the log, so that an earlier activation still
// holding it fails its next append with persistence.ErrConflict instead
// of interleaving its turns with this one's (S8: one writer at a time).
const KindActivation = "agent/activation"

// Activation is the data of a KindActivation record. An agent's first
// activation writes one too when it is traced, with its session's
// creation, and a top-level agent's traced run with its first append.
type Activation struct {
	// TraceParent is the W3C traceparent of the run span of the
	// activation (or top-level run) that wrote the record, when it was
	// traced: the next one's run span links to it (O3), also after the
	// process restarted.
	TraceParent string `json:"traceparent,omitempty"`
}

// Untraced is an activation record without a traceparent.
func Untraced() persistence.Record {
	return persistence.Record{Kind: KindActivation, Data: json.RawMessage(`{}`)}
}

// Traced is the activation record of the run span ctx carries, and
// true, while that span records (O3); else Untraced and false.
func Traced(ctx context.Context) (persistence.Record, bool) {
	// The traceparent is hex digits and dashes: no escaping, and one
	// allocation.
	const head, tail = `{"traceparent":"`, `"}`
	b := make([]byte, 0, len(head)+otelx.TraceParentLen+len(tail))
	b, ok := otelx.AppendTraceParent(append(b, head...), ctx)
	if !ok {
		return Untraced(), false
	}
	return persistence.Record{Kind: KindActivation, Data: append(b, tail...)}, true
}

// LastTrace is the traceparent of the last traced activation that recs
// record, "" when none: the run span a new activation links to (O3).
func LastTrace(recs []persistence.Entry) string {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Kind != KindActivation {
			continue
		}
		var a Activation
		if json.Unmarshal(recs[i].Data, &a) == nil && a.TraceParent != "" {
			return a.TraceParent
		}
	}
	return ""
}

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
