package persistence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/subagent"
)

// deferredSession is a session as a create writes it: its header and
// records encoded. One CreateDeferred made is kept in the store's memory
// until a write stores it (see deferredCreator); it never changes.
type deferredSession struct {
	h    subagent.SessionHeader
	hv   []byte   // the framed header
	vals [][]byte // the encoded records, which reads decode
	n    uint64   // its place among the deferred sessions
}

// newSession validates and encodes a session to create, or fails with
// ErrInvalid. Session ids longer than bbolt's maximum key size (32 KiB),
// or parent ids that leave no room for the index key, are invalid.
func newSession(h subagent.SessionHeader, recs []Record) (*deferredSession, error) {
	if err := validateHeader(h); err != nil {
		return nil, err
	}
	switch {
	case len(h.SessionID) > bolt.MaxKeySize:
		return nil, fmt.Errorf("%w: session id longer than %d bytes", ErrInvalid, bolt.MaxKeySize)
	case len(h.ParentSessionID) > maxParentID:
		return nil, fmt.Errorf("%w: parent session id longer than %d bytes", ErrInvalid, maxParentID)
	}
	body, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("persistence: encode header: %w", err)
	}
	vals, err := encodeRecords(recs)
	if err != nil {
		return nil, err
	}
	return &deferredSession{h: h, hv: frame(body), vals: vals}, nil
}

// CreateDeferred implements deferredCreator: the session is refused as
// CreateWith refuses it, and otherwise kept in memory until the first
// write that changes it stores it in that write's transaction (see
// writable).
func (b *boltStore) CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...Record) (uint64, error) {
	if err := b.enterWrite(ctx); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	d, err := newSession(h, recs)
	if err != nil {
		return 0, err
	}
	err = b.view(h.SessionID, func(tx *bolt.Tx) error {
		all, err := topBucket(tx, sessionsBucket)
		if err != nil {
			return err
		}
		sb, err := sessionOf(all, h.SessionID)
		if err == nil && sb != nil {
			err = fmt.Errorf("%w: %q", ErrExists, h.SessionID)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if b.deferred[h.SessionID] != nil {
		return 0, fmt.Errorf("%w: %q", ErrExists, h.SessionID)
	}
	b.deferredN++
	d.n = b.deferredN
	b.deferred[h.SessionID] = d
	return uint64(len(d.vals)), nil
}

// deferredOf is id's deferred session, nil when it has none. A read takes
// it before its transaction: a write forgets a deferred session only once
// its transaction, which stored the session, committed, so a read that
// finds neither the deferred session nor, after it, the stored one knows
// there is no session.
func (b *boltStore) deferredOf(id string) *deferredSession {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	return b.deferred[id]
}

// deferredList is the deferred sessions in creation order, nil when none.
func (b *boltStore) deferredList() []*deferredSession {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if len(b.deferred) == 0 {
		return nil
	}
	list := make([]*deferredSession, 0, len(b.deferred))
	for _, d := range b.deferred {
		list = append(list, d)
	}
	slices.SortFunc(list, func(x, y *deferredSession) int { return cmp.Compare(x.n, y.n) })
	return list
}

// forget drops d once the transaction that stored it committed.
func (b *boltStore) forget(d *deferredSession) {
	if d == nil {
		return
	}
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if b.deferred[d.h.SessionID] == d {
		delete(b.deferred, d.h.SessionID)
	}
}

// dropDeferred forgets id's deferred session and reports whether it had
// one.
func (b *boltStore) dropDeferred(id string) bool {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	_, ok := b.deferred[id]
	delete(b.deferred, id)
	return ok
}

// writable returns id's bucket for a write in tx, storing the session
// first when it is deferred: stored is then that deferred session, which
// the caller forgets once tx committed (a transaction may run its writes
// again, so the caller sets it afresh on each run).
func (b *boltStore) writable(tx *bolt.Tx, id string) (sb *bolt.Bucket, stored *deferredSession, err error) {
	sb, err = existingSession(tx, id)
	if !errors.Is(err, ErrNotFound) {
		return sb, nil, err
	}
	d := b.deferredOf(id)
	if d == nil {
		return nil, nil, err
	}
	if sb, _, err = b.store(tx, d); err != nil {
		return nil, nil, err
	}
	return sb, d, nil
}

// entriesAfter is what LoadFrom returns of d: its records after sequence
// number after, decoded from the values its first write will store.
func (d *deferredSession) entriesAfter(after uint64) ([]Entry, error) {
	var out []Entry
	for i := after; i < uint64(len(d.vals)); i++ {
		r, err := decodeRecord(d.vals[i])
		if err != nil {
			return nil, &CorruptError{SessionID: d.h.SessionID, Part: "record", Seq: i + 1, Err: err}
		}
		out = append(out, Entry{Seq: i + 1, Record: r})
	}
	return out, nil
}

// withDeferred adds to infos, stored sessions in creation order, the
// sessions of ds that keep lists, in creation order after them, leaving
// out any that a write stored meanwhile (it is in infos already).
func withDeferred(infos []SessionInfo, ds []*deferredSession, keep func(*deferredSession) bool) []SessionInfo {
	for _, d := range ds {
		if keep(d) && !slices.ContainsFunc(infos, func(i SessionInfo) bool { return i.Header.SessionID == d.h.SessionID }) {
			infos = append(infos, SessionInfo{Header: d.h, LastSeq: uint64(len(d.vals))})
		}
	}
	return infos
}
