// Package rules holds what every store checks of what it is given and of
// what it reads back, so that the stores in package persistence and in
// its subpackages (postgres) refuse the same input the same way.
package rules

import (
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/subagent"
)

// ErrInvalid is persistence.ErrInvalid.
var ErrInvalid = errors.New("persistence: invalid input")

// Header reports why h cannot head a log, wrapping ErrInvalid.
func Header(h subagent.SessionHeader) error {
	switch {
	case h.SessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case h.DelegationDepth < 0:
		return fmt.Errorf("%w: negative delegation depth %d", ErrInvalid, h.DelegationDepth)
	}
	return nil
}

// Record reports why a record of kind with data cannot be stored,
// wrapping ErrInvalid. Data must be valid JSON so that every store can
// encode it as is.
func Record(kind string, data []byte) error {
	switch {
	case kind == "":
		return fmt.Errorf("%w: record without kind", ErrInvalid)
	case !jsonv2.ValidLoose(data): // kept as given: a model's arguments may repeat a name
		return fmt.Errorf("%w: %s record data is not valid JSON", ErrInvalid, kind)
	}
	return nil
}

// Task reports why a task cannot be stored, wrapping ErrInvalid: it
// needs an id, a parent session and a state; result, when present, must
// be JSON as the store reads it back (jsonv2.Valid: UTF-8, no name given
// twice), and updated must fall in years 0 to 9999.
func Task(id, parent, state string, result []byte, updated time.Time) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: task without id", ErrInvalid)
	case parent == "":
		return fmt.Errorf("%w: task %q without parent session", ErrInvalid, id)
	case state == "":
		return fmt.Errorf("%w: task %q without state", ErrInvalid, id)
	case len(result) > 0 && !jsonv2.Valid(result):
		return fmt.Errorf("%w: task %q result is not valid JSON", ErrInvalid, id)
	case updated.Year() < 0 || updated.Year() > 9999:
		// The range RFC 3339, and so every encoding store, can hold.
		return fmt.Errorf("%w: task %q update time %v is out of range", ErrInvalid, id, updated)
	}
	return nil
}

// KindMessage is persistence.KindMessage: the one model-visible kind.
const KindMessage = "message"

// LogOnly reports whether records of kind are log-only: kept for the
// runtime (a provider's descriptor, say) rather than shown to the model.
// Every kind but KindMessage is, so a kind added later survives Compact
// without the store having to know it (D4).
func LogOnly(kind string) bool { return kind != KindMessage }

// Compact returns the sequence numbers a Compact up to upTo removes from
// a log ending at last, in order, or ErrInvalid if it may not compact.
// entries yields the log's records in order as sequence number and kind.
// The summary takes the last number.
func Compact(entries iter.Seq2[uint64, string], last, upTo uint64) ([]uint64, error) {
	switch {
	case upTo == 0:
		return nil, fmt.Errorf("%w: compact up to record 0", ErrInvalid)
	case upTo > last:
		return nil, fmt.Errorf("%w: compact up to record %d, past the log's end at %d", ErrInvalid, upTo, last)
	}
	var removed []uint64
	for seq, kind := range entries {
		if seq > upTo {
			break
		}
		if !LogOnly(kind) {
			removed = append(removed, seq)
		}
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("%w: no model-visible record at or below record %d", ErrInvalid, upTo)
	}
	return removed, nil
}

// NotInvalid restates a validation error about a stored value without
// ErrInvalid, which would tell the caller of a read that its input was
// bad.
func NotInvalid(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
}
