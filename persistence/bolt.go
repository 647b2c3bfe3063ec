package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/subagent"
)

// Bolt is a Store kept in one bbolt file: the embedded, on-disk default.
// It is safe for concurrent use. Every call that changes the file is
// fsynced before it returns. Concurrent Appends share one transaction and
// one fsync (bbolt's DB.Batch, a group commit); an Append with none other
// in flight commits at once, without waiting for company.
//
// bbolt takes no context. Each call checks its context before it starts
// and again inside its transaction, so a context that ends while the call
// waits for the write lock or for its batch makes it fail with the
// context's error and change nothing; a call whose transaction committed
// has happened.
//
// # Layout
//
// The file holds one top-level bucket, "sessions", and under it one nested
// bucket per session, keyed by the session id. A session's bucket holds
// its header under the key "header" and each record under its sequence
// number as an 8-byte big-endian key, so that bbolt's byte order is append
// order. Sequence numbers come from the bucket's NextSequence and run 1, 2,
// 3, ... without gaps, because a transaction that rolls back rolls its
// sequence back too. The header key is 6 bytes long and a record key 8, so
// the two never collide. A bucket per session keeps sessions apart: Delete
// drops one bucket, and no key scheme has to escape ids that are prefixes
// of each other.
//
// Every value is framed as a format byte (1), the CRC-32C (Castagnoli) of
// the body as 4 big-endian bytes, then the body. A header's body is the
// JSON of subagent.SessionHeader. A record's body is the uvarint length of
// its kind, the kind, then its data verbatim: data is JSON already, so it
// is stored byte for byte rather than re-encoded. bbolt checksums only its
// own meta pages; the frame's checksum is what notices a changed byte
// inside a value that would otherwise still decode.
//
// # Reading back (K3)
//
// Every stored value is hostile input. Load returns a whole log or no log:
// if the header or any record fails to decode (bad frame, checksum, JSON,
// or a value that a Create or Append would have refused), or the layout is
// not what this type writes (a missing or unexpected key, a gap in the
// sequence numbers, a missing last record), Load fails with a
// *CorruptError wrapping ErrCorrupt that names the session and the first
// bad part; it never skips a record. Each session is its own bucket, so
// every other session still loads and takes appends. Append does not read
// the values already stored (it only refuses to overwrite one), so it still
// adds records to a session whose Load fails; Delete removes a corrupt
// session, which is how an operator discards it.
//
// Damage below the values, in bbolt's own pages, is mostly caught too: a
// damaged key or value fails the checks above, and where bbolt itself
// panics or faults on a damaged page, OpenBolt and Load recover and report
// ErrCorrupt (Part "layout" for Load). Three limits remain. A damaged
// session id in the "sessions" bucket makes that session ErrNotFound. A
// fault Go cannot turn into a panic (an absurd allocation, say) still ends
// the process. And writes are not guarded: a batch of Appends commits in
// bbolt's own goroutine, where no recover reaches, and a write that
// panics part-way leaves bbolt's memory in doubt, so a damaged page met
// while writing crashes the process. Check a suspect file offline with
// `bbolt check`.
type Bolt struct {
	// mu is read-held by every call for its whole duration and write-held
	// by Close, so Close waits for calls in flight and no call reaches a
	// closed bbolt handle.
	mu     sync.RWMutex
	closed bool
	db     *bolt.DB
	// appending counts Appends in flight.
	appending atomic.Int32
}

var _ Store = (*Bolt)(nil)

const (
	// boltOpenTimeout bounds the wait for bbolt's exclusive file lock, so
	// that opening a file another process (or another Bolt in this one)
	// holds fails instead of hanging; it leaves time for a previous
	// process that is exiting to let go.
	boltOpenTimeout = time.Second
	// boltBatchDelay is how long a batch of concurrent Appends waits for
	// company before it commits. It is of the order of one fsync (0.5 to
	// 0.7 ms here), so appenders that arrive during one commit share the
	// next. bbolt's default, 10 ms, made 16 concurrent appenders 6 times
	// slower (BenchmarkBoltAppend/Parallel: 718 µs an Append against
	// 123 µs); a lone Append skips the batch and its wait (Serial: 0.48 ms,
	// one fsync, against 1.5 ms through the batch).
	boltBatchDelay = time.Millisecond

	frameFormat = 1
	frameHeader = 5 // format byte + CRC-32C
)

var (
	sessionsBucket = []byte("sessions")
	headerKey      = []byte("header")
	castagnoli     = crc32.MakeTable(crc32.Castagnoli)
)

// OpenBolt opens (creating if needed) a session store in the bbolt file at
// path. A new file is readable by its owner only. It fails with an error
// naming path if path is a directory, if the file is not a bbolt database
// (the file is left as it was), if bbolt finds its own pages damaged
// (wrapping ErrCorrupt), or if another Bolt, in this process or another,
// holds the file (after waiting about a second for it to let go).
func OpenBolt(path string) (*Bolt, error) {
	var db *bolt.DB
	err := guarded(func() error {
		var err error
		if db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: boltOpenTimeout}); err != nil {
			return err
		}
		db.MaxBatchDelay = boltBatchDelay
		return db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(sessionsBucket)
			return err
		})
	}, func(p any) error {
		// A panic inside bolt.Open loses its half-open handle; the file
		// closes when that is collected.
		return fmt.Errorf("%w: bbolt: %v", ErrCorrupt, p)
	})
	if err == nil {
		return &Bolt{db: db}, nil
	}
	if db != nil {
		_ = db.Close()
	}
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		err = fmt.Errorf("file is locked by another store (in this or another process): %w", err)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrVersionMismatch), errors.Is(err, bolt.ErrChecksum):
		err = fmt.Errorf("not a bbolt database, or a damaged one: %w", err)
	}
	return nil, fmt.Errorf("persistence: open bolt store %q: %w", path, err)
}

// Close waits for calls in flight and closes the file. It is idempotent;
// every other call after it fails with ErrClosed.
func (b *Bolt) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("persistence: close bolt store: %w", err)
	}
	return nil
}

// enter starts a call: it fails if ctx has ended or the store is closed,
// and otherwise read-holds b.mu, which the caller releases.
func (b *Bolt) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Create implements Store. Session ids longer than bbolt's maximum key
// size (32 KiB) are ErrInvalid.
func (b *Bolt) Create(ctx context.Context, h subagent.SessionHeader) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	if err := ValidateHeader(h); err != nil {
		return err
	}
	if len(h.SessionID) > bolt.MaxKeySize {
		return fmt.Errorf("%w: session id longer than %d bytes", ErrInvalid, bolt.MaxKeySize)
	}
	body, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("persistence: encode header: %w", err)
	}
	val := frame(body)
	return b.db.Update(func(tx *bolt.Tx) error {
		// The context may have ended while this waited for the lock.
		if err := ctx.Err(); err != nil {
			return err
		}
		all, err := sessionsOf(tx)
		if err != nil {
			return err
		}
		sb, err := sessionOf(all, h.SessionID)
		switch {
		case err != nil:
			return err
		case sb != nil:
			return fmt.Errorf("%w: %q", ErrExists, h.SessionID)
		}
		if sb, err = all.CreateBucket([]byte(h.SessionID)); err != nil {
			return err
		}
		return sb.Put(headerKey, val)
	})
}

// Append implements Store. Concurrent Appends commit together.
func (b *Bolt) Append(ctx context.Context, sessionID string, recs ...Record) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	// Validate and encode before the transaction: the encoded values are
	// our own copies, so the caller may reuse its slices at once.
	vals := make([][]byte, len(recs))
	for i, r := range recs {
		if err := ValidateRecord(r); err != nil {
			return err
		}
		vals[i] = encodeRecord(r)
	}
	if len(vals) == 0 {
		// Nothing to write; only the session's existence is reported.
		return b.db.View(func(tx *bolt.Tx) error {
			_, err := existingSession(tx, sessionID)
			return err
		})
	}
	// A lone Append commits at once; while others are in flight, Appends
	// join bbolt's batch, which waits boltBatchDelay for company and then
	// commits the lot in one transaction.
	commit := b.db.Batch
	if b.appending.Add(1) == 1 {
		commit = b.db.Update
	}
	defer b.appending.Add(-1)
	return commit(func(tx *bolt.Tx) error {
		// Batch may run this more than once (when another member of the
		// batch fails, it rolls back and retries), so it must touch
		// nothing but tx.
		if err := ctx.Err(); err != nil {
			return err
		}
		sb, err := existingSession(tx, sessionID)
		if err != nil {
			return err
		}
		for _, v := range vals {
			seq, err := sb.NextSequence()
			if err != nil {
				return err
			}
			key := seqKey(seq)
			if k, _ := sb.Cursor().Seek(key); bytes.Equal(k, key) {
				// The bucket's sequence went backwards: writing would
				// overwrite a stored record.
				return &CorruptError{SessionID: sessionID, Part: "layout",
					Err: fmt.Errorf("next sequence number %d is already taken", seq)}
			}
			if err := sb.Put(key, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Load implements Store; see the type's documentation for what it does
// with values that do not decode.
func (b *Bolt) Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error) {
	if err := b.enter(ctx); err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	defer b.mu.RUnlock()
	var (
		h    subagent.SessionHeader
		recs []Record
	)
	err := guarded(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			sb, err := existingSession(tx, sessionID)
			if err != nil {
				return err
			}
			h, recs, err = readLog(sessionID, sb)
			return err
		})
	}, func(p any) error {
		return &CorruptError{SessionID: sessionID, Part: "layout", Err: fmt.Errorf("bbolt: %v", p)}
	})
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	return h, recs, nil
}

// Delete implements Store. It also removes whatever else is stored under
// the session's id, so a corrupt session can always be deleted.
func (b *Bolt) Delete(ctx context.Context, sessionID string) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	return b.db.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		all, err := sessionsOf(tx)
		if err != nil {
			return err
		}
		key := []byte(sessionID)
		if all.Bucket(key) != nil {
			return all.DeleteBucket(key)
		}
		if has(all, key) {
			return all.Delete(key)
		}
		return fmt.Errorf("%w: %q", ErrNotFound, sessionID)
	})
}

// guarded runs fn and turns a panic in it, or a memory fault, into the
// error onPanic makes. bbolt trusts its own pages: a damaged one makes it
// panic on an assertion or read outside the file's mapping. A read-only
// transaction has been rolled back by the time its panic reaches here
// (DB.View defers that), so the store stays usable.
func guarded(fn func() error, onPanic func(p any) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = onPanic(p)
		}
	}()
	return fn()
}

// sessionsOf returns the top-level bucket, which OpenBolt creates.
func sessionsOf(tx *bolt.Tx) (*bolt.Bucket, error) {
	all := tx.Bucket(sessionsBucket)
	if all == nil {
		return nil, fmt.Errorf("%w: the %q bucket is missing", ErrCorrupt, sessionsBucket)
	}
	return all, nil
}

// sessionOf returns id's bucket, nil if nothing is stored under id, or a
// *CorruptError if a plain value sits where the bucket belongs.
func sessionOf(all *bolt.Bucket, id string) (*bolt.Bucket, error) {
	key := []byte(id)
	if sb := all.Bucket(key); sb != nil {
		return sb, nil
	}
	if has(all, key) {
		return nil, &CorruptError{SessionID: id, Part: "layout",
			Err: errors.New("a plain value is stored where the session's bucket belongs")}
	}
	return nil, nil
}

// existingSession is sessionOf with ErrNotFound for a missing session.
func existingSession(tx *bolt.Tx, id string) (*bolt.Bucket, error) {
	all, err := sessionsOf(tx)
	if err != nil {
		return nil, err
	}
	sb, err := sessionOf(all, id)
	if err == nil && sb == nil {
		err = fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return sb, err
}

// has reports whether key is stored in b, as a value or a bucket.
func has(b *bolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return len(key) > 0 && bytes.Equal(k, key)
}

// readLog decodes a session's bucket. Everything it returns is copied out
// of bbolt's memory, which is valid only inside the transaction.
func readLog(id string, sb *bolt.Bucket) (subagent.SessionHeader, []Record, error) {
	corrupt := func(part string, seq uint64, err error) error {
		return &CorruptError{SessionID: id, Part: part, Seq: seq, Err: err}
	}
	hv := sb.Get(headerKey)
	if hv == nil {
		return subagent.SessionHeader{}, nil, corrupt("header", 0, errors.New("missing"))
	}
	h, err := decodeHeader(hv)
	if err != nil {
		return subagent.SessionHeader{}, nil, corrupt("header", 0, err)
	}
	if h.SessionID != id {
		return subagent.SessionHeader{}, nil, corrupt("header", 0, fmt.Errorf("names session %q", h.SessionID))
	}
	last := sb.Sequence()
	// The sequence is stored data too: cap what it may preallocate.
	recs := make([]Record, 0, min(last, 1024))
	next := uint64(1)
	c := sb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case bytes.Equal(k, headerKey):
			continue
		case v == nil:
			return subagent.SessionHeader{}, nil, corrupt("layout", 0, fmt.Errorf("unexpected nested bucket %q", k))
		case len(k) != 8:
			return subagent.SessionHeader{}, nil, corrupt("layout", 0, fmt.Errorf("unexpected key %q", k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq != next {
			return subagent.SessionHeader{}, nil, corrupt("record", next, fmt.Errorf("missing (the next one stored is %d)", seq))
		}
		r, err := decodeRecord(v)
		if err != nil {
			return subagent.SessionHeader{}, nil, corrupt("record", seq, err)
		}
		recs = append(recs, r)
		next++
	}
	if got := next - 1; got != last {
		if got < last {
			return subagent.SessionHeader{}, nil, corrupt("record", next, fmt.Errorf("missing (%d records were appended)", last))
		}
		return subagent.SessionHeader{}, nil, corrupt("layout", 0, fmt.Errorf("%d records stored but the sequence is at %d", got, last))
	}
	return h, recs, nil
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

func frame(body []byte) []byte {
	v := make([]byte, frameHeader, frameHeader+len(body))
	v[0] = frameFormat
	binary.BigEndian.PutUint32(v[1:], crc32.Checksum(body, castagnoli))
	return append(v, body...)
}

// unframe checks v's frame and returns its body, which aliases v.
func unframe(v []byte) ([]byte, error) {
	switch {
	case len(v) < frameHeader:
		return nil, fmt.Errorf("truncated value (%d bytes)", len(v))
	case v[0] != frameFormat:
		return nil, fmt.Errorf("unknown value format %d", v[0])
	}
	body := v[frameHeader:]
	if want, got := binary.BigEndian.Uint32(v[1:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return body, nil
}

func encodeRecord(r Record) []byte {
	body := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(r.Kind)+len(r.Data)), uint64(len(r.Kind)))
	body = append(body, r.Kind...)
	body = append(body, r.Data...)
	return frame(body)
}

func decodeRecord(v []byte) (Record, error) {
	body, err := unframe(v)
	if err != nil {
		return Record{}, err
	}
	n, size := binary.Uvarint(body)
	if size <= 0 || n > uint64(len(body)-size) {
		return Record{}, errors.New("bad kind length")
	}
	body = body[size:]
	r := Record{Kind: string(body[:n]), Data: bytes.Clone(body[n:])}
	if err := ValidateRecord(r); err != nil {
		return Record{}, notInvalid(err)
	}
	return r, nil
}

func decodeHeader(v []byte) (subagent.SessionHeader, error) {
	body, err := unframe(v)
	if err != nil {
		return subagent.SessionHeader{}, err
	}
	var h subagent.SessionHeader
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return subagent.SessionHeader{}, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return subagent.SessionHeader{}, errors.New("bad JSON: data after the header")
	}
	if err := ValidateHeader(h); err != nil {
		return subagent.SessionHeader{}, notInvalid(err)
	}
	return h, nil
}

// notInvalid restates a validation error about a stored value without
// ErrInvalid, which would tell the caller of Load that its input was bad.
func notInvalid(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
}
