// Package crashhook is the node's crash test hooks (contracts S6, S9,
// cmd/node/crash_test.go): a store that reports every acknowledged write
// to a file and may kill the process after the Nth. The node links it
// only when built with the subactortest build tag, as its tests build it
// (issue 19): the product binary has no such hook.
package crashhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// The hooks' variables. Without EnvAppendsFile the store is not wrapped
// at all.
const (
	// EnvAppendsFile names a file to which every acknowledged write of
	// the store (CreateWith, Append, a non-empty AppendAt) is added as one
	// JSON line (an AckedWrite), before the call returns to its caller.
	EnvAppendsFile = "SUBACTOR_TEST_APPENDS_FILE"
	// EnvKillAfter, a positive N, makes the node SIGKILL itself right
	// after its Nth acknowledged write is in that file: a crash at a
	// chosen point, with no chance to clean up. It needs EnvAppendsFile.
	EnvKillAfter = "SUBACTOR_TEST_KILL_AFTER_APPENDS"
)

// AckedWrite is one line of the appends file: the Nth acknowledged write,
// its session and the records it stored under their sequence numbers.
type AckedWrite struct {
	N       int          `json:"n"`
	Session string       `json:"session"`
	Records []AckedEntry `json:"records"`
}

// AckedEntry identifies a stored record without its data.
type AckedEntry struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"` // of the record's data
}

// Digest is how AckedEntry names a record's data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Wrap wraps store in an ackStore when the environment asks for one, and
// returns it unchanged otherwise. The returned function closes the
// appends file.
func Wrap(store persistence.Store) (persistence.Store, func() error, error) {
	path := os.Getenv(EnvAppendsFile)
	kill := os.Getenv(EnvKillAfter)
	if path == "" {
		if kill != "" {
			return nil, nil, fmt.Errorf("%s needs %s", EnvKillAfter, EnvAppendsFile)
		}
		return store, func() error { return nil }, nil
	}
	s := &ackStore{Store: store, sessions: map[string]*seqTracker{}}
	if kill != "" {
		n, err := strconv.Atoi(kill)
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("%s=%q: want a positive number of appends", EnvKillAfter, kill)
		}
		s.killAfter = n
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	s.out = f
	return s, f.Close, nil
}

// ackStore is a Store that reports each acknowledged write to a file and
// may kill the process after the Nth. Only the crash test uses it.
//
// An Append returns no sequence numbers, so ackStore tracks where each
// session's log ends: from CreateWith and AppendAt, or by reading the log
// the first time a session it did not create is written. Writes to one
// session are serialized so that the tracked end stays exact; writes to
// different sessions still reach the store concurrently, and batch there.
type ackStore struct {
	persistence.Store
	killAfter int // 0: never

	mu       sync.Mutex // guards what follows
	out      *os.File
	n        int // acknowledged writes so far
	sessions map[string]*seqTracker
}

// seqTracker is where one session's log ends, under its own lock.
type seqTracker struct {
	mu    sync.Mutex
	known bool
	last  uint64
	// deferred are the records of a deferred create (see CreateDeferred)
	// until the write that stores them with it is acknowledged.
	deferred []persistence.Record
}

// session returns id's tracker, locked; the caller unlocks it.
func (s *ackStore) session(id string) *seqTracker {
	s.mu.Lock()
	t := s.sessions[id]
	if t == nil {
		t = &seqTracker{}
		s.sessions[id] = t
	}
	s.mu.Unlock()
	t.mu.Lock()
	return t
}

// ack writes one acknowledged write, then kills the process if it was the
// chosen one. A failed write to the file kills it too: the test would
// otherwise check against a list that is missing a write.
func (s *ackStore) ack(session string, first uint64, recs []persistence.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	w := AckedWrite{N: s.n, Session: session, Records: make([]AckedEntry, len(recs))}
	for i, r := range recs {
		w.Records[i] = AckedEntry{Seq: first + uint64(i), Kind: r.Kind, SHA256: Digest(r.Data)}
	}
	line, _ := json.Marshal(w) // plain fields always marshal
	if _, err := s.out.Write(append(line, '\n')); err != nil || s.n == s.killAfter {
		// SIGKILL, not an exit: no deferred call, no flush, no Close.
		if self, err := os.FindProcess(os.Getpid()); err == nil {
			_ = self.Kill()
		}
		select {} // the signal is on its way
	}
}

// CreateWith implements persistence.Store.
func (s *ackStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	t := s.session(h.SessionID)
	defer t.mu.Unlock()
	seq, err := s.Store.CreateWith(ctx, h, recs...)
	if err != nil {
		return 0, err
	}
	t.known, t.last = true, seq
	s.ack(h.SessionID, 1, recs)
	return seq, nil
}

// CreateDeferred is the store's CreateDeferred, when it has one (the
// bbolt store does). Nothing is acknowledged: the session's records are, with the
// write that stores them (see stored).
func (s *ackStore) CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	d, ok := s.Store.(interface {
		CreateDeferred(context.Context, subagent.SessionHeader, ...persistence.Record) (uint64, error)
	})
	if !ok {
		return s.CreateWith(ctx, h, recs...)
	}
	t := s.session(h.SessionID)
	defer t.mu.Unlock()
	seq, err := d.CreateDeferred(ctx, h, recs...)
	if err != nil {
		return 0, err
	}
	t.known, t.last = true, seq
	// Copies: the caller may reuse its records' data once this returns.
	t.deferred = make([]persistence.Record, len(recs))
	for i, r := range recs {
		t.deferred[i] = persistence.Record{Kind: r.Kind, Data: bytes.Clone(r.Data)}
	}
	return seq, nil
}

// stored acknowledges a write of recs to id that ended at sequence
// number last: with the records of its deferred create, which the write
// stored too, when it was the session's first.
func (s *ackStore) stored(id string, t *seqTracker, last uint64, recs []persistence.Record) {
	t.known, t.last = true, last
	first := last - uint64(len(recs)) + 1
	if t.deferred != nil {
		recs = append(t.deferred, recs...)
		first, t.deferred = 1, nil
	}
	s.ack(id, first, recs)
}

// Create implements persistence.Store.
func (s *ackStore) Create(ctx context.Context, h subagent.SessionHeader) error {
	_, err := s.CreateWith(ctx, h)
	return err
}

// Append implements persistence.Store.
func (s *ackStore) Append(ctx context.Context, id string, recs ...persistence.Record) error {
	t := s.session(id)
	defer t.mu.Unlock()
	if err := s.track(ctx, id, t); err != nil {
		return err
	}
	if err := s.Store.Append(ctx, id, recs...); err != nil || len(recs) == 0 {
		return err
	}
	s.stored(id, t, t.last+uint64(len(recs)), recs)
	return nil
}

// AppendAt implements persistence.Store.
func (s *ackStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	t := s.session(id)
	defer t.mu.Unlock()
	seq, err := s.Store.AppendAt(ctx, id, expect, recs...)
	if err != nil || len(recs) == 0 {
		return seq, err
	}
	s.stored(id, t, seq, recs)
	return seq, nil
}

// Delete implements persistence.Store.
func (s *ackStore) Delete(ctx context.Context, id string) error {
	t := s.session(id)
	defer t.mu.Unlock()
	err := s.Store.Delete(ctx, id)
	if err == nil {
		t.known, t.deferred = false, nil
	}
	return err
}

// track reads where id's log ends when t does not know it yet. After a
// Compact the last entry still carries the log's last sequence number.
func (s *ackStore) track(ctx context.Context, id string, t *seqTracker) error {
	if t.known {
		return nil
	}
	_, entries, err := s.Store.LoadFrom(ctx, id, 0)
	if err != nil {
		return err
	}
	t.known, t.last = true, 0
	if len(entries) > 0 {
		t.last = entries[len(entries)-1].Seq
	}
	return nil
}
