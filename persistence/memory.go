package persistence

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/subactor/subactor/subagent"
)

// Memory is a Store that keeps logs in process memory. It is safe for
// concurrent use; the zero value is not usable, call NewMemory.
type Memory struct {
	mu       sync.Mutex
	sessions map[string]*memLog
}

type memLog struct {
	header subagent.SessionHeader
	recs   []Record
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{sessions: make(map[string]*memLog)}
}

// Create implements Store.
func (m *Memory) Create(ctx context.Context, h subagent.SessionHeader) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateHeader(h); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[h.SessionID]; ok {
		return fmt.Errorf("%w: %q", ErrExists, h.SessionID)
	}
	m.sessions[h.SessionID] = &memLog{header: h}
	return nil
}

// Append implements Store.
func (m *Memory) Append(ctx context.Context, sessionID string, recs ...Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Validate and copy outside the lock; the caller may reuse its slices.
	copied := make([]Record, len(recs))
	for i, r := range recs {
		if err := ValidateRecord(r); err != nil {
			return err
		}
		copied[i] = cloneRecord(r)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.sessions[sessionID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, sessionID)
	}
	l.recs = append(l.recs, copied...)
	return nil
}

// Load implements Store.
func (m *Memory) Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error) {
	if err := ctx.Err(); err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	m.mu.Lock()
	l, ok := m.sessions[sessionID]
	var h subagent.SessionHeader
	var recs []Record
	if ok {
		h = l.header
		// Records are never modified once stored, so a shallow copy of the
		// slice is a consistent snapshot; the deep copy can run unlocked.
		recs = append([]Record(nil), l.recs...)
	}
	m.mu.Unlock()
	if !ok {
		return subagent.SessionHeader{}, nil, fmt.Errorf("%w: %q", ErrNotFound, sessionID)
	}
	for i, r := range recs {
		recs[i] = cloneRecord(r)
	}
	return h, recs, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, sessionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[sessionID]; !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, sessionID)
	}
	delete(m.sessions, sessionID)
	return nil
}

func cloneRecord(r Record) Record {
	return Record{Kind: r.Kind, Data: bytes.Clone(r.Data)}
}
