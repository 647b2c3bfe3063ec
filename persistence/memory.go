package persistence

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence/internal/rules"
	"github.com/subactor/subactor/subagent"
)

// memStore is a Store and a TaskStore that keeps everything in process
// memory. It is safe for concurrent use; the zero value is not usable,
// call NewMemory.
//
// Sessions are spread over shards, each with a lock of its own: every
// turn of every agent appends here, and one lock for all of them was
// where parents delegating at once queued.
type memStore struct {
	seed   maphash.Seed
	shards [memShards]memShard
	// created numbers sessions in creation order, for Sessions.
	created atomic.Uint64

	tasksMu sync.Mutex
	tasks   map[string]TaskRecord
}

const memShards = 32

type memShard struct {
	mu       sync.Mutex
	sessions map[string]*memLog
	_        [64 - 16]byte // a 64-byte shard: each lock on a cache line of its own
}

type memLog struct {
	header  subagent.SessionHeader
	created uint64
	// last is the last sequence number handed out; entries may have gaps
	// below it after a Compact, but never at it.
	last uint64
	// entries is replaced, never changed in place, once a reader may hold
	// it: Append only adds past its length and Compact builds a new one,
	// so LoadFrom reads the slice it took under the lock without it. The
	// data of the records one call stored shares one allocation (see
	// copyRecords), never the caller's memory.
	entries []Entry
}

var _ Backend = (*memStore)(nil)

// NewMemory returns an empty store of sessions and tasks in process memory.
func NewMemory() Backend {
	m := &memStore{seed: maphash.MakeSeed(), tasks: make(map[string]TaskRecord)}
	for i := range m.shards {
		m.shards[i].sessions = make(map[string]*memLog)
	}
	return m
}

// shard is where sessionID's log lives.
func (m *memStore) shard(sessionID string) *memShard {
	return &m.shards[maphash.String(m.seed, sessionID)%memShards]
}

// Create implements Store.
func (m *memStore) Create(ctx context.Context, h subagent.SessionHeader) error {
	_, err := m.CreateWith(ctx, h)
	return err
}

// CreateWith implements Store.
func (m *memStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...Record) (uint64, error) {
	return m.create(ctx, h, len(recs), recs)
}

// CreateOwn is CreateWith for the agent loop, whose records past the
// first checked ones hold data its own writer made (see jsonv2.Own):
// those are copied without checking them again. With AppendOwnAt that
// is about 1 µs of a delegation's 13.5 at one P (bench/ SubactorSpawn).
func (m *memStore) CreateOwn(_ jsonv2.Own, ctx context.Context, h subagent.SessionHeader, checked int, recs ...Record) (uint64, error) {
	return m.create(ctx, h, checked, recs)
}

// create is CreateWith checking the first checked records.
func (m *memStore) create(ctx context.Context, h subagent.SessionHeader, checked int, recs []Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := validateHeader(h); err != nil {
		return 0, err
	}
	var buf [stackEntries]Entry
	copied, err := copyRecords(buf[:0], recs, checked)
	if err != nil {
		return 0, err
	}
	// Made before the lock is taken: an allocation may have to help the
	// collector, and nobody should wait for that.
	l := &memLog{header: h}
	l.add(copied)
	sh := m.shard(h.SessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.sessions[h.SessionID]; ok {
		return 0, fmt.Errorf("%w: %q", ErrExists, h.SessionID)
	}
	l.created = m.created.Add(1)
	sh.sessions[h.SessionID] = l
	return l.last, nil
}

// Append implements Store.
func (m *memStore) Append(ctx context.Context, sessionID string, recs ...Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var buf [stackEntries]Entry
	copied, err := copyRecords(buf[:0], recs, len(recs))
	if err != nil {
		return err
	}
	sh := m.shard(sessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.log(sessionID)
	if err != nil {
		return err
	}
	l.add(copied)
	return nil
}

// AppendAt implements Store.
func (m *memStore) AppendAt(ctx context.Context, sessionID string, expect uint64, recs ...Record) (uint64, error) {
	return m.appendAt(ctx, sessionID, expect, len(recs), recs)
}

// AppendOwnAt is AppendAt for records whose data the agent loop's own
// writer made (see jsonv2.Own): copied without checking them again.
func (m *memStore) AppendOwnAt(_ jsonv2.Own, ctx context.Context, sessionID string, expect uint64, recs ...Record) (uint64, error) {
	return m.appendAt(ctx, sessionID, expect, 0, recs)
}

// appendAt is AppendAt checking the first checked records.
func (m *memStore) appendAt(ctx context.Context, sessionID string, expect uint64, checked int, recs []Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var buf [stackEntries]Entry
	copied, err := copyRecords(buf[:0], recs, checked)
	if err != nil {
		return 0, err
	}
	sh := m.shard(sessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.log(sessionID)
	if err != nil {
		return 0, err
	}
	if l.last != expect {
		return 0, &ConflictError{SessionID: sessionID, Expected: expect, Actual: l.last}
	}
	l.add(copied)
	return l.last, nil
}

// Load implements Store.
func (m *memStore) Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error) {
	h, stored, err := m.snapshot(ctx, sessionID)
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	recs := make([]Record, len(stored))
	slab := make([]byte, 0, dataSize(stored))
	for i, e := range stored {
		recs[i] = Record{Kind: e.Kind, Data: carve(&slab, e.Data)}
	}
	return h, recs, nil
}

// LoadFrom implements Store.
func (m *memStore) LoadFrom(ctx context.Context, sessionID string, after uint64) (subagent.SessionHeader, []Entry, error) {
	h, stored, err := m.snapshot(ctx, sessionID)
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	if stored == nil {
		return h, nil, nil
	}
	entries := slices.Clone(stored[sort.Search(len(stored), func(i int) bool { return stored[i].Seq > after }):])
	ownData(entries)
	return h, entries, nil
}

// snapshot returns a session's header and its stored entries, which the
// caller may read without the lock (stored entries are never changed in
// place) but must copy before it hands them out.
func (m *memStore) snapshot(ctx context.Context, sessionID string) (subagent.SessionHeader, []Entry, error) {
	if err := ctx.Err(); err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	sh := m.shard(sessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.log(sessionID)
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	return l.header, l.entries, nil
}

// Header implements Store.
func (m *memStore) Header(ctx context.Context, sessionID string) (subagent.SessionHeader, error) {
	h, _, err := m.snapshot(ctx, sessionID)
	return h, err
}

// Sessions implements Store.
func (m *memStore) Sessions(ctx context.Context) ([]SessionInfo, error) {
	return m.list(ctx, func(*memLog) bool { return true })
}

// Children implements Store. memStore scans every session: it has no disk
// to spare, and a scan of a map is cheap next to what a caller does with
// each child.
func (m *memStore) Children(ctx context.Context, parentSessionID string) ([]SessionInfo, error) {
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", ErrInvalid)
	}
	return m.list(ctx, func(l *memLog) bool { return l.header.ParentSessionID == parentSessionID })
}

// list collects the sessions keep wants, oldest first, shard by shard: a
// session created while it runs may be missing.
func (m *memStore) list(ctx context.Context, keep func(*memLog) bool) ([]SessionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var found []created
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for _, l := range sh.sessions {
			if keep(l) {
				found = append(found, created{SessionInfo{Header: l.header, LastSeq: l.last}, l.created})
			}
		}
		sh.mu.Unlock()
	}
	return inCreationOrder(found), nil
}

// Compact implements Store.
func (m *memStore) Compact(ctx context.Context, sessionID string, upTo uint64, summary Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateRecord(summary); err != nil {
		return err
	}
	sh := m.shard(sessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l, err := sh.log(sessionID)
	if err != nil {
		return err
	}
	removed, err := toCompact(l.entries, l.last, upTo)
	if err != nil {
		return err
	}
	// A new slice: readers may hold the old one.
	at := removed[len(removed)-1]
	kept := make([]Entry, 0, len(l.entries)-len(removed)+1)
	for _, e := range l.entries {
		if e.Seq == at {
			kept = append(kept, Entry{Seq: at, Record: summary})
		}
		if e.Seq > upTo || rules.LogOnly(e.Kind) {
			kept = append(kept, e)
		}
	}
	// A kept record may share its allocation with removed ones stored by
	// the same call (an agent appends its messages and a log-only record
	// together); copying what is kept into a new one lets the removed
	// data go once no reader holds the old slice.
	ownData(kept)
	l.entries = kept
	return nil
}

// Delete implements Store.
func (m *memStore) Delete(ctx context.Context, sessionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := m.shard(sessionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, err := sh.log(sessionID); err != nil {
		return err
	}
	delete(sh.sessions, sessionID)
	return nil
}

// PutTask implements TaskStore.
func (m *memStore) PutTask(ctx context.Context, t TaskRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateTask(t); err != nil {
		return err
	}
	t = cloneTask(t)
	m.tasksMu.Lock()
	defer m.tasksMu.Unlock()
	m.tasks[t.ID] = t
	return nil
}

// GetTask implements TaskStore.
func (m *memStore) GetTask(ctx context.Context, id string) (TaskRecord, error) {
	if err := ctx.Err(); err != nil {
		return TaskRecord{}, err
	}
	m.tasksMu.Lock()
	t, ok := m.tasks[id]
	m.tasksMu.Unlock()
	if !ok {
		return TaskRecord{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	return cloneTask(t), nil
}

// ListTasks implements TaskStore.
func (m *memStore) ListTasks(ctx context.Context, parentSessionID string) ([]TaskRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", ErrInvalid)
	}
	var out []TaskRecord
	m.tasksMu.Lock()
	for _, t := range m.tasks {
		if t.ParentSessionID == parentSessionID {
			out = append(out, t)
		}
	}
	m.tasksMu.Unlock()
	slices.SortFunc(out, func(a, b TaskRecord) int { return cmp.Compare(a.ID, b.ID) })
	for i, t := range out {
		out[i] = cloneTask(t)
	}
	return out, nil
}

// DeleteTask implements TaskStore.
func (m *memStore) DeleteTask(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.tasksMu.Lock()
	defer m.tasksMu.Unlock()
	if _, ok := m.tasks[id]; !ok {
		return fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	delete(m.tasks, id)
	return nil
}

// Close implements Backend: memory has nothing to release.
func (m *memStore) Close() error { return nil }

// log returns the session's log or ErrNotFound; sh.mu must be held.
func (sh *memShard) log(sessionID string) (*memLog, error) {
	l, ok := sh.sessions[sessionID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, sessionID)
	}
	return l, nil
}

// stackEntries is how many records a call copies without allocating the
// slice it gathers them in; an agent appends a turn's few records at once.
const stackEntries = 8

// minEntries is the capacity a log's first records get, so that a short
// log does not grow its slice record by record (1, 2, 4, ...): a child
// that answers at once has four (descriptor, prompt, answer, stop), and
// a parked one holds its spare room as long as it lives.
const minEntries = 4

// add numbers entries on from l.last and appends them. It only adds past
// the length of l.entries, which readers may hold (see memLog.entries).
func (l *memLog) add(entries []Entry) {
	if len(entries) == 0 {
		return
	}
	for i := range entries {
		l.last++
		entries[i].Seq = l.last
	}
	if cap(l.entries) == 0 {
		l.entries = make([]Entry, 0, max(minEntries, len(entries)))
	}
	l.entries = append(l.entries, entries...)
}

// copyRecords validates the first checked of recs and copies them all,
// as entries without sequence numbers, into dst's spare capacity or a new
// slice, so that the caller may reuse its slices; it runs before any lock
// is taken. The data of all recs goes into one allocation, and it is the
// copy that is validated, so what is stored is what passed.
func copyRecords(dst []Entry, recs []Record, checked int) ([]Entry, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if cap(dst)-len(dst) < len(recs) {
		dst = make([]Entry, 0, len(recs))
	}
	size := 0
	for _, r := range recs {
		size += len(r.Data)
	}
	slab := make([]byte, 0, size)
	for i, r := range recs {
		c := Record{Kind: r.Kind, Data: carve(&slab, r.Data)}
		if i < checked {
			if err := validateRecord(c); err != nil {
				return nil, err
			}
		}
		dst = append(dst, Entry{Record: c})
	}
	return dst, nil
}

// dataSize is the length of all entries' data together.
func dataSize(entries []Entry) int {
	n := 0
	for _, e := range entries {
		n += len(e.Data)
	}
	return n
}

// ownData copies the data of entries into one new allocation of their
// own.
func ownData(entries []Entry) {
	slab := make([]byte, 0, dataSize(entries))
	for i := range entries {
		entries[i].Data = carve(&slab, entries[i].Data)
	}
}

// carve appends data to *slab and returns the copy, with its capacity
// cut to its length so that appending to it can never write into the
// next record's data. Sized from the same data, *slab does not grow.
func carve(slab *[]byte, data []byte) []byte {
	s := *slab
	from := len(s)
	s = append(s, data...)
	*slab = s
	return s[from:len(s):len(s)]
}

// cloneTask copies t's result and keeps its time in UTC without a
// monotonic reading, as a store that encodes it would return it.
func cloneTask(t TaskRecord) TaskRecord {
	t.Result = bytes.Clone(t.Result)
	t.UpdatedAt = t.UpdatedAt.UTC()
	return t
}
