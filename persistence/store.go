package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/subactor/subactor/subagent"
)

// KindMessage marks a record holding one model-visible conversation turn.
const KindMessage = "message"

// Record is one entry of a session log.
type Record struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Store errors, matched with errors.Is.
var (
	ErrNotFound = errors.New("persistence: session not found")
	ErrExists   = errors.New("persistence: session exists")
	ErrInvalid  = errors.New("persistence: invalid input")
	// ErrCorrupt means stored data did not decode or is not laid out the
	// way the store writes it. When the damage is in one session's data
	// the error is a *CorruptError naming the session and the part.
	ErrCorrupt = errors.New("persistence: stored data is corrupt")
	// ErrClosed means the store was used after Close.
	ErrClosed = errors.New("persistence: store is closed")
)

// CorruptError reports a stored value that does not decode, so that a log
// is never returned with a part silently missing or altered (K3). It wraps
// ErrCorrupt and the cause.
type CorruptError struct {
	SessionID string
	// Part is what failed: "header", "record" or "layout" (a key, a bucket
	// or a sequence where the store's structure expects another, or the
	// storage engine's own structure).
	Part string
	// Seq is the record's sequence number (1 for the first record ever
	// appended to the session) when Part is "record", otherwise 0.
	Seq uint64
	Err error
}

func (e *CorruptError) Error() string {
	what := e.Part
	if e.Part == "record" {
		what = fmt.Sprintf("record %d", e.Seq)
	}
	return fmt.Sprintf("persistence: session %q: %s is corrupt: %v", e.SessionID, what, e.Err)
}

// Unwrap returns ErrCorrupt and the cause, for errors.Is and errors.As.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// Store keeps session logs. Implementations are safe for concurrent use and
// never share memory with their callers: what goes in and what comes out are
// copies. A failed call changes nothing, and a call whose context has ended
// fails with the context's error.
type Store interface {
	// Create starts an empty log under h. It fails with ErrExists if the
	// session id is taken and ErrInvalid for an empty id or a negative depth.
	Create(ctx context.Context, h subagent.SessionHeader) error
	// Append adds records to the end of a log, all or none. It fails with
	// ErrNotFound for an unknown session and ErrInvalid for a record with no
	// kind or with data that is not valid JSON.
	Append(ctx context.Context, sessionID string, recs ...Record) error
	// Load returns a log's header and records in append order, or
	// ErrNotFound. A store that reads its values back from outside the
	// process treats them as hostile: if any part of the log does not
	// decode, Load returns no log and an error wrapping ErrCorrupt
	// (*CorruptError), and every other log stays readable and writable.
	Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error)
	// Delete removes a log, header and records, or fails with ErrNotFound.
	// A provider rolling back a child it never published uses it so that no
	// session row outlives a failed start (S4).
	Delete(ctx context.Context, sessionID string) error
}

// ValidateHeader reports why h cannot head a log, wrapping ErrInvalid.
func ValidateHeader(h subagent.SessionHeader) error {
	switch {
	case h.SessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case h.DelegationDepth < 0:
		return fmt.Errorf("%w: negative delegation depth %d", ErrInvalid, h.DelegationDepth)
	}
	return nil
}

// ValidateRecord reports why r cannot be stored, wrapping ErrInvalid.
// Data must be valid JSON so that every store can encode it as is.
func ValidateRecord(r Record) error {
	switch {
	case r.Kind == "":
		return fmt.Errorf("%w: record without kind", ErrInvalid)
	case !json.Valid(r.Data):
		return fmt.Errorf("%w: %s record data is not valid JSON", ErrInvalid, r.Kind)
	}
	return nil
}
