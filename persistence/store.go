package persistence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/subactor/subactor/persistence/internal/rules"
	"github.com/subactor/subactor/subagent"
)

// KindMessage marks a record holding one model-visible conversation turn.
// Every other kind is log-only: kept for the runtime (a provider's
// descriptor, say) rather than shown to the model, and kept by Compact,
// also a kind added later (D4).
const KindMessage = rules.KindMessage

// Record is one entry of a session log.
type Record struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Entry is a record with its sequence number. The first record ever
// appended to a session is 1, the next 2, and so on; Compact leaves gaps
// but never renumbers, so sequence numbers only grow along a log.
type Entry struct {
	Seq uint64 `json:"seq"`
	Record
}

// SessionInfo describes a session without its records.
type SessionInfo struct {
	Header subagent.SessionHeader
	// LastSeq is the sequence number of the log's last record, 0 for an
	// empty log: what AppendAt expects next. Until a Compact it is also
	// the number of records.
	LastSeq uint64
}

// Store errors, matched with errors.Is.
var (
	ErrNotFound = errors.New("persistence: session not found")
	ErrExists   = errors.New("persistence: session exists")
	ErrInvalid  = rules.ErrInvalid
	// ErrCorrupt means stored data did not decode or is not laid out the
	// way the store writes it. When the damage is in one session's data
	// the error is a *CorruptError naming the session and the part.
	ErrCorrupt = errors.New("persistence: stored data is corrupt")
	// ErrClosed means the store was used after Close.
	ErrClosed = errors.New("persistence: store is closed")
	// ErrConflict means a conditional write found the log somewhere other
	// than where its caller expected; the error is a *ConflictError.
	ErrConflict = errors.New("persistence: log moved")
	// ErrFailed means the store could not make a write durable (a write
	// or fsync of its file failed). That write was not acknowledged; the
	// store refuses every later call until it is closed and reopened,
	// because what its file holds is in doubt until then.
	ErrFailed = errors.New("persistence: store failed, reopen it")
	// ErrReadOnly means a write was asked of a store opened read-only
	// (OpenBoltReadOnly).
	ErrReadOnly = errors.New("persistence: store is read-only")
	// ErrEmpty means a store file provably never held a commit (a node
	// killed while creating it left it empty, zeroed, or as bbolt's
	// initialisation wrote it): it holds no sessions and nothing in it
	// can be lost. A read-only open and CheckBolt return it; OpenBolt
	// starts the file afresh.
	ErrEmpty = errors.New("persistence: the store file never held a commit")
	// ErrTaskNotFound means no task has the id. It also matches
	// ErrNotFound, so one check serves sessions and tasks.
	ErrTaskNotFound error = taskNotFound{}
)

type taskNotFound struct{}

func (taskNotFound) Error() string        { return "persistence: task not found" }
func (taskNotFound) Is(target error) bool { return target == ErrNotFound }

// ConflictError reports a conditional append (Store.AppendAt) refused
// because the log does not end where the caller expected. Actual lets the
// caller resynchronise: read what it missed with LoadFrom(Expected) and
// try again from Actual.
type ConflictError struct {
	SessionID string
	// Expected is the last sequence number the caller stated.
	Expected uint64
	// Actual is where the log really ends (0 for an empty log).
	Actual uint64
}

// Error says where the log ends and where the caller expected it to.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("persistence: session %q: log ends at record %d, not %d", e.SessionID, e.Actual, e.Expected)
}

// Unwrap returns ErrConflict, for errors.Is.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// CorruptError reports a stored value that does not decode, so that a log
// is never returned with a part silently missing or altered (K3). It wraps
// ErrCorrupt and the cause.
type CorruptError struct {
	// File names the store's file when the damage is in the file's own
	// structure rather than in one session or task: SessionID and TaskID
	// are then empty.
	File string
	// SessionID names the damaged session; it is empty when the damage
	// is in a task (see TaskID) or in the file's structure (see File).
	SessionID string
	// TaskID names the damaged task record, when Part is "task".
	TaskID string
	// Part is what failed: "header", "meta" (a store's own bookkeeping
	// for the session), "record", "task" or "layout" (a key, a bucket, an
	// index entry or a sequence where the store's structure expects
	// another, or the storage engine's own structure).
	Part string
	// Seq is the record's sequence number (1 for the first record ever
	// appended to the session) when Part is "record", otherwise 0.
	Seq uint64
	Err error
}

func (e *CorruptError) Error() string {
	switch {
	case e.Part == "task":
		return fmt.Sprintf("persistence: task %q is corrupt: %v", e.TaskID, e.Err)
	case e.SessionID == "" && e.File != "":
		// The whole file is in doubt: say what gets the sessions back.
		return fmt.Sprintf("persistence: %s is damaged: %v; copy what is readable into a fresh file with RepairBolt (node check -repair)", e.File, e.Err)
	}
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
// fails with the context's error. Bad input (ErrInvalid) is refused before
// anything is written.
type Store interface {
	// Create starts an empty log under h. It fails with ErrExists if the
	// session id is taken and ErrInvalid for an empty id or a negative depth.
	Create(ctx context.Context, h subagent.SessionHeader) error
	// CreateWith is Create and Append in one step, all or nothing: if it
	// fails, no session exists under h's id afterwards (unless one did
	// before: ErrExists). It returns the last record's sequence number,
	// len(recs), or 0 for no records.
	CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...Record) (seq uint64, err error)
	// Append adds records to the end of a log, all or none. It fails with
	// ErrNotFound for an unknown session and ErrInvalid for a record with no
	// kind or with data that is not valid JSON.
	Append(ctx context.Context, sessionID string, recs ...Record) error
	// AppendAt is a conditional Append: it adds recs only if the log ends
	// at sequence number expect (0 for an empty log), and returns the
	// sequence number of the log's last record after the append. If the
	// log ends elsewhere it changes nothing and fails with a
	// *ConflictError (ErrConflict), so two writers that read the same log
	// cannot both extend it: the one that lands second learns it lost.
	// With no records it only checks where the log ends.
	AppendAt(ctx context.Context, sessionID string, expect uint64, recs ...Record) (newSeq uint64, err error)
	// Load returns a log's header and records in append order, or
	// ErrNotFound. A store that reads its values back from outside the
	// process treats them as hostile: if any part of the log does not
	// decode, Load returns no log and an error wrapping ErrCorrupt
	// (*CorruptError), and every other log stays readable and writable.
	Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error)
	// LoadFrom is Load with sequence numbers, returning only the records
	// after sequence number after (0 for all of them), in order. Past the
	// end of the log it returns no entries and no error. A store that
	// checks what it reads checks the part it returns.
	LoadFrom(ctx context.Context, sessionID string, after uint64) (subagent.SessionHeader, []Entry, error)
	// Header returns a log's header without reading its records, or
	// ErrNotFound.
	Header(ctx context.Context, sessionID string) (subagent.SessionHeader, error)
	// Sessions lists every session, in creation order (a session deleted
	// and created again counts as new), without reading records. If one
	// session's header (or a store's own bookkeeping for it) does not
	// decode, it fails with that session's *CorruptError rather than
	// leave it out; Delete discards it.
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// Children lists the sessions whose header names parentSessionID as
	// their parent, in creation order; none is not an error. An empty
	// parentSessionID is ErrInvalid (list top-level sessions with
	// Sessions).
	Children(ctx context.Context, parentSessionID string) ([]SessionInfo, error)
	// Compact shortens a log for the model while keeping what the runtime
	// needs: it removes every model-visible record (see KindMessage) with a
	// sequence number at or below upTo and stores summary in their place,
	// under the sequence number of the last one removed. Log-only records
	// (descriptors, D4) and records past upTo stay, with their sequence
	// numbers, so LoadFrom stays ordered and the log still ends where it
	// did: an AppendAt that expected the old end still succeeds. It fails
	// with ErrInvalid, changing nothing, for an invalid summary, an upTo
	// of 0 or past the log's end, or when no model-visible record is at
	// or below upTo.
	Compact(ctx context.Context, sessionID string, upTo uint64, summary Record) error
	// Delete removes a log, header and records, or fails with ErrNotFound.
	// A provider rolling back a child it never published uses it so that no
	// session row outlives a failed start (S4).
	Delete(ctx context.Context, sessionID string) error
}

// deferredCreator is a Store that can create a session without a write
// of its own (the bbolt store is one; callers find the method by a type
// assertion): CreateDeferred is CreateWith, checked and answered the same
// way, but the session's header and records are written in the
// transaction of the first write that changes the session (an Append or
// AppendAt with records, a Compact). Until then it is in the store's
// memory, and every call of the store sees it as it sees a stored one
// (Load, Header, Sessions, Children, AppendAt's check, Delete); a crash,
// or closing the store, loses it. A deferred session counts as created
// when that first write stores it: until then Sessions and Children list
// it after the stored ones.
//
// It is for a session whose creation can be derived again after a crash:
// a delegated child's, whose id and prompt its parent's log holds before
// the child starts (S9), so that a child that stored nothing runs anew
// under the same id. Its delegation then costs one durable write less.
type deferredCreator interface {
	CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...Record) (seq uint64, err error)
}

// TaskRecord is the stored state of one background task (T3): which
// delegation it belongs to and how it ended. The store does not interpret
// State or Result.
type TaskRecord struct {
	ID              string `json:"id"`
	ParentSessionID string `json:"parentSessionId"`
	// ChildSessionID is the child's session, when it has one.
	ChildSessionID string `json:"childSessionId,omitempty"`
	Provider       string `json:"provider,omitempty"`
	// Continuable marks an activation of a continuable child (S7): its
	// parent may send the child follow-ups (S8).
	Continuable bool   `json:"continuable,omitempty"`
	State       string `json:"state"`
	// Result is optional JSON (a settled run's result, say).
	Result json.RawMessage `json:"result,omitempty"`
	// UpdatedAt is stored to the nanosecond and comes back in UTC.
	UpdatedAt time.Time `json:"updatedAt"`
}

// TaskStore keeps task records, apart from session logs: deleting a
// session leaves its tasks, and ids of the two never collide. The rules of
// Store hold: safe for concurrent use, copies in and out, a failed call
// changes nothing, an ended context fails the call.
type TaskStore interface {
	// PutTask creates or replaces the task with t.ID. It fails with
	// ErrInvalid if t has no id, parent session or state, a Result that
	// is not valid JSON, or an UpdatedAt outside years 0 to 9999.
	PutTask(ctx context.Context, t TaskRecord) error
	// GetTask returns the task with id, or ErrTaskNotFound.
	GetTask(ctx context.Context, id string) (TaskRecord, error)
	// ListTasks returns the tasks of one parent session, ordered by id;
	// none is not an error. An empty parentSessionID is ErrInvalid.
	ListTasks(ctx context.Context, parentSessionID string) ([]TaskRecord, error)
	// DeleteTask removes the task with id, or fails with ErrTaskNotFound.
	DeleteTask(ctx context.Context, id string) error
}

// Backend is a Store and a TaskStore in one, as NewMemory and OpenBolt
// make them.
type Backend interface {
	Store
	TaskStore
	// Close releases the store. A bbolt store waits for calls in flight,
	// closes its file, and fails every later call with ErrClosed; a
	// memory store has nothing to release. Idempotent.
	Close() error
}

// validateTask, validateHeader, validateRecord and toCompact apply the
// rules every store shares (package rules) to this package's types.
func validateTask(t TaskRecord) error {
	return rules.Task(t.ID, t.ParentSessionID, t.State, t.Result, t.UpdatedAt)
}

func validateHeader(h subagent.SessionHeader) error { return rules.Header(h) }

func validateRecord(r Record) error { return rules.Record(r.Kind, r.Data) }

func toCompact(entries []Entry, last, upTo uint64) ([]uint64, error) {
	return rules.Compact(func(yield func(uint64, string) bool) {
		for _, e := range entries {
			if !yield(e.Seq, e.Kind) {
				return
			}
		}
	}, last, upTo)
}

// created is a session listed with its creation number.
type created struct {
	info SessionInfo
	n    uint64
}

// inCreationOrder sorts list oldest first and returns its sessions.
func inCreationOrder(list []created) []SessionInfo {
	slices.SortFunc(list, func(a, b created) int { return cmp.Compare(a.n, b.n) })
	infos := make([]SessionInfo, len(list))
	for i, c := range list {
		infos[i] = c.info
	}
	return infos
}

// records is Load's answer from LoadFrom's: the records without their
// sequence numbers.
func records(h subagent.SessionHeader, entries []Entry, err error) (subagent.SessionHeader, []Record, error) {
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	recs := make([]Record, len(entries))
	for i, e := range entries {
		recs[i] = e.Record
	}
	return h, recs, nil
}
