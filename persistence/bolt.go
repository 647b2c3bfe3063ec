package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/subagent"
)

// boltStore is a Store and a TaskStore kept in one bbolt file: the embedded,
// on-disk default. It is safe for concurrent use. Every call that changes
// the file is fsynced before it returns. Concurrent writes share one
// transaction and one fsync (a group commit: see update); one with none
// other in flight commits at once, without waiting for company.
//
// bbolt takes no context. Each call checks its context before it starts
// and again inside its transaction, so a context that ends while the call
// waits for its transaction makes it fail with the context's error and
// change nothing; a call whose transaction committed has happened.
//
// # Failed writes
//
// If bbolt fails to write or fsync a commit, the call fails with an error
// wrapping ErrFailed and the cause, and was not acknowledged. From then on
// every call but Close fails with that error: after a failed fsync the
// kernel may have dropped the pages it could not write, so neither bbolt's
// view of the file nor a later commit on top of it can be trusted. Close
// and OpenBolt again; the reopened store holds what was acknowledged. (If
// the fsync that failed was the one after bbolt wrote its meta page, the
// unacknowledged commit may survive the reopen: a failed fsync says the
// write is in doubt, not that it is undone.)
//
// If bbolt panics while writing (it trusts its own pages, and a damaged
// one makes it panic), the write fails with a *CorruptError naming the
// file (ErrCorrupt), and so does every later call but Close. Every commit
// runs in one of its writers' goroutines, where the panic is recovered.
//
// # Layout
//
// The file holds three top-level buckets. "sessions" holds one nested
// bucket per session, keyed by the session id. A session's bucket holds
// its header under the key "header", its bookkeeping under "meta", and
// each record under its sequence number as an 8-byte big-endian key, so
// that bbolt's byte order is append order. Sequence numbers come from the
// bucket's NextSequence and run 1, 2, 3, ... without gaps (a transaction
// that rolls back rolls its sequence back too) until a Compact removes
// some. The header key is 6 bytes long, the meta key 4 and a record key
// 8, so they never collide. A bucket per session keeps sessions apart:
// Delete drops one bucket, and no key scheme has to escape ids that are
// prefixes of each other.
//
// The meta value records the session's creation number (from the
// "sessions" bucket's own sequence), so that Sessions lists in creation
// order by reading headers and metas, never records; and what Compact
// did: the highest sequence number a summary took (below it a log may
// have gaps, above it none) and how many records it removed, so that
// Load still notices a record gone missing.
//
// "children" indexes sessions by parent: the key is the parent id
// (prefixed with its uvarint length, so that no id is a prefix of another
// one's key) then the child's creation number, 8 bytes big-endian; the
// value is the child id. Children reads one key range, in creation order,
// instead of decoding every header in the file; Create and Delete keep the
// index in the same transaction as the session.
//
// "tasks" holds task records (TaskStore), keyed by task id, apart from the
// sessions.
//
// Every value is framed as a format byte (1), the CRC-32C (Castagnoli) of
// the body as 4 big-endian bytes, then the body. A header's body is the
// JSON of subagent.SessionHeader, a meta's and a task's the JSON of their
// own types. A record's body is the uvarint length of its kind, the kind,
// then its data verbatim: data is JSON already, so it is stored byte for
// byte rather than re-encoded. bbolt checksums only its own meta pages;
// the frame's checksum is what notices a changed byte inside a value that
// would otherwise still decode.
//
// A file written before "meta" and "children" existed is brought up to
// date when OpenBolt first opens it, in one transaction: each session
// gets its meta (creation numbers follow session id order, since the old
// layout kept no creation order) and its index entry. Frames and records
// are unchanged, so nothing is rewritten.
//
// # Reading back (K3)
//
// Every stored value is hostile input. Load returns a whole log or no log:
// if the header, the meta or any record fails to decode (bad frame,
// checksum, JSON, or a value that a Create or Append would have refused),
// or the layout is not what this type writes (a missing or unexpected key,
// a gap in the sequence numbers outside what Compact removed, a missing
// last record), Load fails with a *CorruptError wrapping ErrCorrupt that
// names the session and the first bad part; it never skips a record.
// LoadFrom checks the header, the meta and the records it returns. Each
// session is its own bucket, so every other session still loads and takes
// appends. Append does not read the values already stored (it only
// refuses to overwrite one), so it still adds records to a session whose
// Load fails; Delete removes a corrupt session, and any index entry
// naming it, which is how an operator discards it.
//
// Damage below the values, in bbolt's own pages, is caught too. bbolt
// trusts its freelist, and a damaged one makes it hand out pages in use:
// writes then overwrite other sessions without an error (measured). So
// OpenBolt reads every page first (checkPages: 0.25 to 0.7 s for a 208 MB
// file here, a few ms for a few MB) and refuses a damaged file with a
// *CorruptError naming it; RepairBolt copies what is readable into a
// fresh file. Where bbolt panics or faults on a page damaged later, the
// reads recover and report ErrCorrupt (Part "layout"), and a write fails
// the store (see Failed writes). Limits remain: a damaged session id in
// the "sessions" bucket makes that session ErrNotFound; a fault Go cannot
// turn into a panic (an absurd allocation, say) still ends the process;
// and a branch page damaged after OpenBolt to name one of its own
// ancestors makes a read that reaches it loop until memory runs out.
type boltStore struct {
	// mu is read-held by every call for its whole duration and write-held
	// by Close, so Close waits for calls in flight and no call reaches a
	// closed bbolt handle.
	mu     sync.RWMutex
	closed bool
	db     *bolt.DB
	path   string
	// file is bbolt's file, for checkPages.
	file     *os.File
	readOnly bool
	// metaDamage is what OpenDamage returns.
	metaDamage []error
	// The group commit (see commit): writes waiting for the next
	// transaction, and whether one of their callers is committing.
	wmu     sync.Mutex
	queue   []*write
	leading bool
	// failed holds the first error that failed the store (ErrFailed, or
	// ErrCorrupt when bbolt panicked in a write); once set, every call
	// but Close returns it.
	failed atomic.Pointer[error]
	// stuck is set when bbolt panicked in a write and its transaction
	// would not roll back either: bbolt's write lock stays held, and
	// Close must not wait for it.
	stuck atomic.Bool
	// putHook, set only by tests, runs before each record is put and
	// fails the transaction with its error: a fault in mid-write. A
	// panicking hook is bbolt meeting a damaged page.
	putHook func(seq uint64) error
	// deferred are the sessions CreateDeferred made that no write has
	// stored yet, by id; deferredN numbers them in creation order.
	dmu       sync.Mutex
	deferred  map[string]*deferredSession
	deferredN uint64
}

var (
	_ Backend         = (*boltStore)(nil)
	_ deferredCreator = (*boltStore)(nil)
)

const (
	// boltOpenTimeout bounds the wait for bbolt's exclusive file lock, so
	// that opening a file another process (or another store in this one)
	// holds fails instead of hanging; it leaves time for a previous
	// process that is exiting to let go.
	boltOpenTimeout = time.Second
	// boltReadOnlyTimeout is the same for a read-only open, which only a
	// writer keeps out, and a writer holds its lock for as long as it
	// runs: the shortest wait bbolt knows, one try.
	boltReadOnlyTimeout = time.Nanosecond
	// maxProblems caps how many of bbolt's consistency problems an error
	// or a check report carries: one bad page can yield thousands.
	maxProblems = 20

	frameFormat = 1
	frameHeader = 5 // format byte + CRC-32C

	// maxParentID leaves room in a "children" key for the length prefix
	// and the creation number.
	maxParentID = bolt.MaxKeySize - binary.MaxVarintLen64 - 8
)

var (
	sessionsBucket = []byte("sessions")
	childrenBucket = []byte("children")
	tasksBucket    = []byte("tasks")
	headerKey      = []byte("header")
	metaKey        = []byte("meta")
	castagnoli     = crc32.MakeTable(crc32.Castagnoli)
)

// OpenBolt opens (creating if needed) a session store in the bbolt file at
// path. A new file is readable by its owner only. It fails with an error
// naming path if path is a directory, if the file is not a bbolt database
// (the file is left as it was), if bbolt's pages are damaged (a
// *CorruptError naming the file, wrapping ErrCorrupt: see RepairBolt), or
// if another store, in this process or another, holds the file (after
// waiting about a second for it to let go).
//
// The store is safe for concurrent use. Every call that changes the file
// is fsynced before it returns; concurrent writes share one transaction
// and one fsync (a group commit). It has CreateDeferred (see
// deferredCreator): a deferred session is written by the commit of its
// first write. If bbolt fails to write or fsync, the call fails with
// ErrFailed and so does every later call but Close: close and open the
// file again, and the store holds what was acknowledged. Every stored
// value is read back as hostile input: a session whose values do not
// decode fails its Load with a *CorruptError, and every other session
// stays readable and writable.
func OpenBolt(path string) (Backend, error) {
	return asBackend(openBolt(path, openWrite, nil))
}

// OpenBoltReadOnly opens the bbolt file at path for reading only: the file
// is opened O_RDONLY, under a shared lock that other readers share and
// that only a writer keeps out, and nothing is ever written to it, so it
// works on a read-only file or file system. Every call that would write
// fails with ErrReadOnly. It fails at once, with bbolt's ErrTimeout, while
// a writer (OpenBolt) holds the file; with ErrEmpty if the file never
// held a commit; with a *CorruptError naming the file if bbolt's tree is
// damaged (a read could loop on it: see CheckBolt); and with an error if
// the file is missing or written in a layout older than this package's
// (opening it with OpenBolt once brings it up to date).
func OpenBoltReadOnly(path string) (Backend, error) {
	return asBackend(openBolt(path, openRead, nil))
}

// OpenDamage returns what the store found damaged in its file when it
// opened and reads around (a damaged meta page: bbolt reads the commit
// before it), one error per damage. CheckBolt names it too. Only a bbolt
// store has the method: callers ask for it by interface assertion.
func (b *boltStore) OpenDamage() []error { return b.metaDamage }

// asBackend keeps the store of a failed open a nil Backend.
func asBackend(b *boltStore, err error) (Backend, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// openMode is how openBolt opens a file: for writing (OpenBolt), for
// reading (OpenBoltReadOnly), or read-only for CheckBolt and RepairBolt,
// which walk a damaged tree themselves.
type openMode int

const (
	openWrite openMode = iota
	openRead
	openCheck
)

// openBolt opens the file at path, with the function bbolt opens the file
// with (nil for os.OpenFile), which is how tests reach the file.
func openBolt(path string, mode openMode, openFile func(string, int, os.FileMode) (*os.File, error)) (*boltStore, error) {
	readOnly := mode != openWrite
	b := &boltStore{path: path, readOnly: readOnly, deferred: map[string]*deferredSession{}}
	db, err := b.openDB(readOnly, openFile)
	if err == nil {
		err = b.sameFile()
	}
	if err == nil {
		b.metaDamage = metaDamage(readMetas(b.file, db.Info().PageSize))
		err = b.guard(func() error {
			switch mode {
			case openCheck:
				return db.View(current)
			case openRead:
				if w, _ := checkStructure(db, b.file, false); w.treeDamaged {
					return b.damaged(summary(w.problems))
				}
				return db.View(current)
			}
			// bbolt trusts its freelist: a damaged one makes it hand
			// out pages in use, and a write then overwrites other
			// sessions without a word, or panics in its commit
			// (measured). So the file's pages are checked before the
			// first write (CheckBolt adds bbolt's own check).
			if _, problems := checkStructure(db, b.file, false); len(problems) > 0 {
				return b.damaged(summary(problems))
			}
			return db.Update(prepare)
		})
	}
	if err == nil {
		b.db = db
		return b, nil
	}
	if db != nil {
		_ = db.Close()
	}
	var damaged *CorruptError
	switch {
	case errors.As(err, &damaged):
		return nil, err // it names the file
	case errors.Is(err, berrors.ErrTimeout):
		err = fmt.Errorf("file is locked by another store (in this or another process): %w", err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		err = fmt.Errorf("not a bbolt database, or a damaged one: %w", err)
	}
	return nil, fmt.Errorf("persistence: open bolt store %q: %w", b.path, err)
}

// errReplaced refuses a file that RepairBolt swapped out while this open
// waited for its lock: the lock is the old file's.
var errReplaced = errors.New("the file was replaced while this waited for its lock (by RepairBolt?); open it again")

// sameFile checks that b's path still names the file bbolt locked.
func (b *boltStore) sameFile() error {
	named, err := os.Stat(b.path)
	if err != nil {
		return err
	}
	locked, err := b.file.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(named, locked) {
		return errReplaced
	}
	return nil
}

// summary is one error for problems: the first, and how many more.
func summary(problems []error) error {
	if len(problems) == 1 {
		return problems[0]
	}
	more := fmt.Sprint(len(problems) - 1)
	if len(problems) == maxProblems {
		more += " or more"
	}
	return fmt.Errorf("%w (and %s more)", problems[0], more)
}

// startAfresh handles a file f that never held a commit (see ErrEmpty):
// read-only, it is ErrEmpty; for writing, it is emptied, under bbolt's
// own lock so that no other store can be writing to it, and bbolt starts
// it afresh. bbolt would refuse a zeroed or cut-short one.
func startAfresh(f *os.File, readOnly bool) error {
	empty, err := neverCommitted(f)
	switch {
	case err != nil || !empty:
		return err
	case readOnly:
		return ErrEmpty
	}
	if !tryLock(f) {
		return nil // a live store holds it, so it is not empty: bbolt waits
	}
	if empty, err = neverCommitted(f); err != nil || !empty {
		return err // written to before the lock was taken
	}
	return f.Truncate(0)
}

// boltInitialMap is the mapping a writable store starts with: bbolt's
// allocation step (its default AllocSize). Growing a file, bbolt fsyncs
// it; below its allocation step it grows to its mapping, which it doubles
// from 32 KiB, so a new store's first 16 MiB would cost ten fsyncs and as
// many remaps (each waiting for the read transactions of the moment).
// Mapped at the step from the start, the file grows to it once and then a
// step at a time, as bbolt grows any larger file: one fsync per 16 MiB.
// The file's size is then 16 MiB from its first commit, without the
// blocks (Unix files are sparse there); on Windows bbolt sizes it so at
// open.
const boltInitialMap = 16 << 20

// openDB opens b's file with bbolt. Opened for writing, bbolt reads its
// freelist now; read-only, only tx.Check would, which runs after
// checkPages has checked the freelist's page.
func (b *boltStore) openDB(readOnly bool, openFile func(string, int, os.FileMode) (*os.File, error)) (*bolt.DB, error) {
	if openFile == nil {
		openFile = os.OpenFile
	}
	opts := &bolt.Options{
		Timeout:  boltOpenTimeout,
		ReadOnly: readOnly,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := openFile(name, flag, perm)
			if err == nil {
				err = startAfresh(f, readOnly)
			}
			if err != nil && f != nil {
				_ = f.Close()
				f = nil
			}
			b.file = f
			return f, err
		},
	}
	if readOnly {
		opts.Timeout = boltReadOnlyTimeout
	} else {
		opts.InitialMmapSize = boltInitialMap
	}
	var db *bolt.DB
	err := b.guard(func() error {
		var err error
		db, err = bolt.Open(b.path, 0o600, opts)
		return err
	})
	// A panic inside bolt.Open loses its half-open handle; the file
	// closes when that is collected.
	return db, err
}

// checkStructure runs checkPages from the meta page bbolt reads and,
// with deep, on a file that passed it, bbolt's consistency check
// (tx.Check), which adds keys in order to what checkPages finds at about
// twice its cost; it returns the walk and what they found, at most
// maxProblems.
func checkStructure(db *bolt.DB, f io.ReaderAt, deep bool) (*pageWalk, []error) {
	var (
		w        *pageWalk
		problems []error
	)
	_ = db.View(func(tx *bolt.Tx) error {
		size := db.Info().PageSize
		m, _ := inUse(readMetas(f, size)) // bbolt opened it: one is valid
		w = checkPages(f, size, m, uint64(tx.Size())/uint64(size))
		if problems = w.problems; len(problems) > 0 || !deep {
			return nil
		}
		// Drained to the end: the check's goroutine ends with its
		// channel.
		for err := range tx.Check() {
			if len(problems) < maxProblems {
				problems = append(problems, fmt.Errorf("bbolt: %w", err))
			}
		}
		return nil
	})
	return w, problems
}

// prepare creates the top-level buckets and brings a file from before the
// "children" index up to date (see boltStore's Layout). The index bucket's
// presence is the mark of a current file, and it is created in the same
// transaction as the metas, so a migration happens whole or not at all.
func prepare(tx *bolt.Tx) error {
	all, err := tx.CreateBucketIfNotExists(sessionsBucket)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(tasksBucket); err != nil {
		return err
	}
	if tx.Bucket(childrenBucket) != nil {
		return nil
	}
	children, err := tx.CreateBucket(childrenBucket)
	if err != nil {
		return err
	}
	// Collect first: changing buckets under a cursor is undefined.
	var ids [][]byte
	c := all.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil { // a session bucket; a plain value is Load's to report
			ids = append(ids, bytes.Clone(k))
		}
	}
	for _, id := range ids {
		sb := all.Bucket(id)
		if sb.Get(metaKey) != nil {
			continue
		}
		created, err := all.NextSequence()
		if err != nil {
			return err
		}
		if err := sb.Put(metaKey, encodeMeta(sessionMeta{Created: created})); err != nil {
			return err
		}
		// A header that does not decode stays unindexed: Load reports
		// it, and Delete finds no entry to remove.
		h, err := readHeader(string(id), sb)
		if err != nil || h.ParentSessionID == "" || len(h.ParentSessionID) > maxParentID {
			continue
		}
		if err := children.Put(childKey(h.ParentSessionID, created), id); err != nil {
			return err
		}
	}
	return nil
}

// errOldLayout refuses a read-only open of a file that prepare has not
// brought up to date, since a read-only store cannot.
var errOldLayout = errors.New("the file lacks the store's buckets: it is empty, damaged, or in an older layout (open it for writing once to bring it up to date)")

// current is prepare for a read-only store: it checks that nothing needs
// doing.
func current(tx *bolt.Tx) error {
	for _, name := range [][]byte{sessionsBucket, tasksBucket, childrenBucket} {
		if tx.Bucket(name) == nil {
			return errOldLayout
		}
	}
	return nil
}

// Close waits for calls in flight and closes the file. It is idempotent;
// every other call after it fails with ErrClosed.
func (b *boltStore) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.stuck.Load() {
		return errors.New("persistence: close bolt store: bbolt's write lock is held since it panicked: the file stays open and locked until the process ends")
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("persistence: close bolt store: %w", err)
	}
	return nil
}

// enter starts a call: it fails if ctx has ended, the store is closed or
// has failed, and otherwise read-holds b.mu, which the caller releases.
func (b *boltStore) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	err := b.failure()
	if b.closed {
		err = ErrClosed
	}
	if err != nil {
		b.mu.RUnlock()
	}
	return err
}

// enterWrite is enter for a call that writes: a read-only store refuses
// it.
func (b *boltStore) enterWrite(ctx context.Context) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	if b.readOnly {
		b.mu.RUnlock()
		return ErrReadOnly
	}
	return nil
}

// failure returns the error that failed the store, or nil.
func (b *boltStore) failure() error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail makes err the store's failure unless it has one already, and
// returns the store's failure.
func (b *boltStore) fail(err error) error {
	b.failed.CompareAndSwap(nil, &err)
	return b.failure()
}

// damaged is the error for damage in b's file itself.
func (b *boltStore) damaged(err error) *CorruptError {
	return &CorruptError{File: b.path, Part: "layout", Err: err}
}

// guard runs fn, turning a panic or fault of bbolt's on a damaged page
// into an error naming the file (see guarded).
func (b *boltStore) guard(fn func() error) error {
	return guarded(fn, func(p any) error { return b.damaged(fmt.Errorf("bbolt: %v", p)) })
}

// write is one write waiting in the group commit.
type write struct {
	fn func(*bolt.Tx) error
	// done gets the write's result, or errLead when its caller is to
	// commit the next transaction.
	done chan error
}

// errLead hands the group commit to a waiting write's caller.
var errLead = errors.New("persistence: lead the next commit")

// update runs fn in a read-write transaction and commits it, fsynced.
//
// Writes share transactions (a group commit): a write with none other
// in flight commits at once; writes that arrive while a transaction
// commits queue, and the first of them, once that commit is done,
// commits them all in the next one. Every commit runs in one of its
// writers' goroutines, unlike bbolt's DB.Batch, which commits in a
// goroutine of its own, where a panic on a damaged page would end the
// process. A transaction may run fn more than once (when another write
// in it fails, it rolls back and goes on without it), so fn must touch
// nothing but tx, or reset what it sets on each run.
//
// If the fns succeeded and the commit did not, bbolt failed to write or
// sync the file: the store fails (ErrFailed). If bbolt panicked, the
// store fails with a *CorruptError naming the file.
func (b *boltStore) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	w := &write{done: make(chan error, 1), fn: func(tx *bolt.Tx) error {
		// The context may have ended, or another write failed the
		// store, while this waited for its transaction. (A write
		// queued behind the one that failed must not commit on top of
		// a file in doubt, even if its own fsync would pass.)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.failure(); err != nil {
			return err
		}
		return fn(tx)
	}}
	b.wmu.Lock()
	b.queue = append(b.queue, w)
	lead := !b.leading
	b.leading = true
	b.wmu.Unlock()
	if !lead {
		if err := <-w.done; err != errLead {
			return err
		}
	}
	b.lead()
	return <-w.done
}

// lead commits the queued writes, this caller's among them, then hands
// the group commit to the first write queued meanwhile, if any.
func (b *boltStore) lead() {
	b.wmu.Lock()
	group := b.queue
	b.queue = nil
	b.wmu.Unlock()

	// A write that fails leaves the transaction; it runs again alone
	// after the others committed, so that its answer does not depend
	// on writes that were in its transaction but did not commit.
	var alone []*write
	for len(group) > 0 {
		failed := -1
		err := b.commit(func(tx *bolt.Tx) error {
			for i, w := range group {
				if err := w.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 && len(group) > 1 {
			alone = append(alone, group[failed])
			group = slices.Delete(group, failed, failed+1)
			continue
		}
		for _, w := range group {
			w.done <- err
		}
		break
	}
	for _, w := range alone {
		w.done <- b.commit(w.fn)
	}

	b.wmu.Lock()
	defer b.wmu.Unlock()
	if len(b.queue) > 0 {
		b.queue[0].done <- errLead
		return
	}
	b.leading = false
}

// commit runs fn in one read-write transaction and commits it.
func (b *boltStore) commit(fn func(*bolt.Tx) error) error {
	if err := b.failure(); err != nil {
		return err
	}
	var tx *bolt.Tx
	ran, panicked := false, false
	err := guarded(func() error {
		var err error
		if tx, err = b.db.Begin(true); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		ran = true
		return tx.Commit()
	}, func(p any) error {
		// A panic part-way through a write leaves bbolt's memory in
		// doubt: the store refuses every call from now on. Rolling back
		// releases bbolt's write lock, so that Close can close the file.
		panicked = true
		if tx != nil && tx.DB() != nil {
			_ = guarded(tx.Rollback, func(any) error { return nil })
			b.stuck.Store(tx.DB() != nil)
		}
		return b.fail(b.damaged(fmt.Errorf("bbolt panicked while writing, so the store refuses every call: %v", p)))
	})
	if err != nil && ran && !panicked {
		// The first failure is what later calls report.
		return b.fail(fmt.Errorf("%w: commit: %w", ErrFailed, err))
	}
	return err
}

// view runs fn in a read-only transaction, turning a panic on a damaged
// page into a *CorruptError for sessionID, or for the file when
// sessionID is empty (see guarded).
func (b *boltStore) view(sessionID string, fn func(*bolt.Tx) error) error {
	return guarded(func() error {
		return b.db.View(fn)
	}, func(p any) error {
		err := fmt.Errorf("bbolt: %v", p)
		if sessionID == "" {
			return b.damaged(err)
		}
		return &CorruptError{SessionID: sessionID, Part: "layout", Err: err}
	})
}

// Create implements Store. Session ids longer than bbolt's maximum key
// size (32 KiB), or parent ids that leave no room for the index key, are
// ErrInvalid.
func (b *boltStore) Create(ctx context.Context, h subagent.SessionHeader) error {
	_, err := b.CreateWith(ctx, h)
	return err
}

// CreateWith implements Store: the header, the meta, the index entry and
// the records go in one transaction.
func (b *boltStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...Record) (uint64, error) {
	if err := b.enterWrite(ctx); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	d, err := newSession(h, recs)
	if err != nil {
		return 0, err
	}
	var last uint64
	err = b.update(ctx, func(tx *bolt.Tx) error {
		if b.deferredOf(h.SessionID) != nil {
			return fmt.Errorf("%w: %q", ErrExists, h.SessionID)
		}
		var err error
		_, last, err = b.store(tx, d)
		return err
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// store creates d's session in tx: its header, meta, index entry and
// records. It returns the session's bucket and its last sequence number.
func (b *boltStore) store(tx *bolt.Tx, d *deferredSession) (*bolt.Bucket, uint64, error) {
	h := d.h
	all, children, err := indexesOf(tx)
	if err != nil {
		return nil, 0, err
	}
	sb, err := sessionOf(all, h.SessionID)
	switch {
	case err != nil:
		return nil, 0, err
	case sb != nil:
		return nil, 0, fmt.Errorf("%w: %q", ErrExists, h.SessionID)
	}
	created, err := all.NextSequence()
	if err != nil {
		return nil, 0, err
	}
	if sb, err = all.CreateBucket([]byte(h.SessionID)); err != nil {
		return nil, 0, err
	}
	if err := sb.Put(headerKey, d.hv); err != nil {
		return nil, 0, err
	}
	if err := sb.Put(metaKey, encodeMeta(sessionMeta{Created: created})); err != nil {
		return nil, 0, err
	}
	if h.ParentSessionID != "" {
		if err := children.Put(childKey(h.ParentSessionID, created), []byte(h.SessionID)); err != nil {
			return nil, 0, err
		}
	}
	last, err := b.putRecords(h.SessionID, sb, d.vals)
	return sb, last, err
}

// Append implements Store. Concurrent Appends commit together.
func (b *boltStore) Append(ctx context.Context, sessionID string, recs ...Record) error {
	if err := b.enterWrite(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	// Validate and encode before the transaction: the encoded values are
	// our own copies, so the caller may reuse its slices at once.
	vals, err := encodeRecords(recs)
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		// Nothing to write; only the session's existence is reported.
		_, err := b.end(sessionID)
		return err
	}
	var stored *deferredSession
	err = b.update(ctx, func(tx *bolt.Tx) error {
		var sb *bolt.Bucket
		var err error
		if sb, stored, err = b.writable(tx, sessionID); err != nil {
			return err
		}
		_, err = b.putRecords(sessionID, sb, vals)
		return err
	})
	if err == nil {
		b.forget(stored)
	}
	return err
}

// AppendAt implements Store. Concurrent AppendAts commit together; one
// that conflicts writes nothing but does not fail its transaction, so
// losers do not make the winners' transaction roll back and retry.
func (b *boltStore) AppendAt(ctx context.Context, sessionID string, expect uint64, recs ...Record) (uint64, error) {
	if err := b.enterWrite(ctx); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	vals, err := encodeRecords(recs)
	if err != nil {
		return 0, err
	}
	if len(vals) == 0 {
		at, err := b.end(sessionID)
		switch {
		case err != nil:
			return 0, err
		case at != expect:
			return 0, &ConflictError{SessionID: sessionID, Expected: expect, Actual: at}
		}
		return expect, nil
	}
	var (
		newSeq   uint64
		conflict error
		stored   *deferredSession
	)
	// moved reports, and notes as the conflict, a log that ends at at
	// rather than at expect.
	moved := func(at uint64) bool {
		if at == expect {
			return false
		}
		conflict = &ConflictError{SessionID: sessionID, Expected: expect, Actual: at}
		return true
	}
	err = b.update(ctx, func(tx *bolt.Tx) error {
		newSeq, conflict, stored = 0, nil, nil
		sb, err := existingSession(tx, sessionID)
		if errors.Is(err, ErrNotFound) {
			// A deferred session's log ends where its create put it:
			// a conflict stores nothing.
			if d := b.deferredOf(sessionID); d != nil && moved(uint64(len(d.vals))) {
				return nil
			}
			sb, stored, err = b.writable(tx, sessionID)
		}
		if err != nil || moved(sb.Sequence()) {
			return err
		}
		newSeq, err = b.putRecords(sessionID, sb, vals)
		return err
	})
	switch {
	case err != nil:
		return 0, err
	case conflict != nil:
		return 0, conflict
	}
	b.forget(stored)
	return newSeq, nil
}

// putRecords appends encoded records to sb under the next sequence
// numbers and returns the last one.
func (b *boltStore) putRecords(sessionID string, sb *bolt.Bucket, vals [][]byte) (uint64, error) {
	for _, v := range vals {
		seq, err := sb.NextSequence()
		if err != nil {
			return 0, err
		}
		if b.putHook != nil {
			if err := b.putHook(seq); err != nil {
				return 0, err
			}
		}
		key := seqKey(seq)
		if has(sb, key) {
			// The bucket's sequence went backwards: writing would
			// overwrite a stored record.
			return 0, &CorruptError{SessionID: sessionID, Part: "layout",
				Err: fmt.Errorf("next sequence number %d is already taken", seq)}
		}
		if err := sb.Put(key, v); err != nil {
			return 0, err
		}
	}
	return sb.Sequence(), nil
}

// Load implements Store; see the type's documentation for what it does
// with values that do not decode.
func (b *boltStore) Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []Record, error) {
	return records(b.LoadFrom(ctx, sessionID, 0))
}

// LoadFrom implements Store. From 0 it checks the whole log as Load does;
// from further on, the records it returns and the log's end.
func (b *boltStore) LoadFrom(ctx context.Context, sessionID string, after uint64) (subagent.SessionHeader, []Entry, error) {
	if err := b.enter(ctx); err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	defer b.mu.RUnlock()
	var (
		h       subagent.SessionHeader
		entries []Entry
	)
	err := b.viewSession(sessionID, func(sb *bolt.Bucket, d *deferredSession) error {
		var err error
		if d != nil {
			h = d.h
			entries, err = d.entriesAfter(after)
			return err
		}
		var m sessionMeta
		if h, m, err = readHead(sessionID, sb); err != nil {
			return err
		}
		entries, err = readEntries(sessionID, sb, m, after)
		return err
	})
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	return h, entries, nil
}

// Header implements Store: it decodes the header alone.
func (b *boltStore) Header(ctx context.Context, sessionID string) (subagent.SessionHeader, error) {
	if err := b.enter(ctx); err != nil {
		return subagent.SessionHeader{}, err
	}
	defer b.mu.RUnlock()
	var h subagent.SessionHeader
	err := b.viewSession(sessionID, func(sb *bolt.Bucket, d *deferredSession) error {
		if d != nil {
			h = d.h
			return nil
		}
		var err error
		h, err = readHeader(sessionID, sb)
		return err
	})
	return h, err // readHeader returns no header with an error
}

// viewSession runs fn in a read-only transaction on sessionID's bucket
// or, with sb nil, on its deferred session; a missing session is
// ErrNotFound. The deferred session is taken before the transaction (see
// deferredOf).
func (b *boltStore) viewSession(sessionID string, fn func(sb *bolt.Bucket, d *deferredSession) error) error {
	d := b.deferredOf(sessionID)
	return b.view(sessionID, func(tx *bolt.Tx) error {
		sb, err := existingSession(tx, sessionID)
		switch {
		case d != nil && errors.Is(err, ErrNotFound):
			return fn(nil, d)
		case err != nil:
			return err
		}
		return fn(sb, nil)
	})
}

// end returns where sessionID's log, stored or deferred, ends.
func (b *boltStore) end(sessionID string) (uint64, error) {
	var at uint64
	err := b.viewSession(sessionID, func(sb *bolt.Bucket, d *deferredSession) error {
		if d != nil {
			at = uint64(len(d.vals))
		} else {
			at = sb.Sequence()
		}
		return nil
	})
	return at, err
}

// Sessions implements Store: it decodes each session's header and meta
// and sorts by creation number; records are not read.
func (b *boltStore) Sessions(ctx context.Context) ([]SessionInfo, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	var list []created
	deferred := b.deferredList()
	err := b.view("", func(tx *bolt.Tx) error {
		all, err := topBucket(tx, sessionsBucket)
		if err != nil {
			return err
		}
		c := all.Cursor()
		var prev []byte
		for k, v := c.First(); k != nil; k, v = c.Next() {
			// Keys come in order: one that does not is a page damaged
			// since OpenBolt, met again, and the listing stops there.
			if prev != nil && bytes.Compare(k, prev) <= 0 {
				return b.damaged(fmt.Errorf("the sessions bucket lists %q after %q", k, prev))
			}
			prev = k
			id := string(k)
			sb, err := sessionOf(all, id)
			if err != nil {
				return err
			}
			if v != nil || sb == nil {
				continue // unreachable: sessionOf reported the plain value
			}
			h, m, err := readHead(id, sb)
			if err != nil {
				return err
			}
			list = append(list, created{SessionInfo{Header: h, LastSeq: sb.Sequence()}, m.Created})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return withDeferred(inCreationOrder(list), deferred, func(*deferredSession) bool { return true }), nil
}

// Children implements Store by reading the parent's range of the
// "children" index. Each entry is checked against the child's header and
// meta: an entry that does not match them fails the call with a
// *CorruptError naming the child (Part "layout"), which Delete clears.
func (b *boltStore) Children(ctx context.Context, parentSessionID string) ([]SessionInfo, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", ErrInvalid)
	}
	var infos []SessionInfo
	deferred := b.deferredList()
	err := b.view("", func(tx *bolt.Tx) error {
		all, children, err := indexesOf(tx)
		if err != nil {
			return err
		}
		prefix := childPrefix(parentSessionID)
		c := children.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			id := string(v)
			stale := func(why string) error {
				return &CorruptError{SessionID: id, Part: "layout",
					Err: fmt.Errorf("index entry for a child of %q: %s", parentSessionID, why)}
			}
			if v == nil || len(k) != len(prefix)+8 {
				return stale(fmt.Sprintf("malformed key %q", k))
			}
			sb, err := sessionOf(all, id)
			switch {
			case err != nil:
				return err
			case sb == nil:
				return stale("the session is missing")
			}
			h, m, err := readHead(id, sb)
			switch {
			case err != nil:
				return err
			case h.ParentSessionID != parentSessionID || m.Created != binary.BigEndian.Uint64(k[len(prefix):]):
				return stale("it does not match the session")
			}
			infos = append(infos, SessionInfo{Header: h, LastSeq: sb.Sequence()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return withDeferred(infos, deferred, func(d *deferredSession) bool { return d.h.ParentSessionID == parentSessionID }), nil
}

// Compact implements Store. It reads and checks the whole log first, so a
// corrupt log is refused (ErrCorrupt) rather than rewritten.
func (b *boltStore) Compact(ctx context.Context, sessionID string, upTo uint64, summary Record) error {
	if err := b.enterWrite(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	if err := validateRecord(summary); err != nil {
		return err
	}
	sv := encodeRecord(summary)
	var stored *deferredSession
	err := b.update(ctx, func(tx *bolt.Tx) error {
		var sb *bolt.Bucket
		var err error
		if sb, stored, err = b.writable(tx, sessionID); err != nil {
			return err
		}
		_, m, err := readHead(sessionID, sb)
		if err != nil {
			return err
		}
		entries, err := readEntries(sessionID, sb, m, 0)
		if err != nil {
			return err
		}
		removed, err := toCompact(entries, sb.Sequence(), upTo)
		if err != nil {
			return err
		}
		for _, seq := range removed {
			if err := sb.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		at := removed[len(removed)-1]
		if err := sb.Put(seqKey(at), sv); err != nil {
			return err
		}
		m.Compacted = max(m.Compacted, at)
		m.Removed += uint64(len(removed)) - 1
		return sb.Put(metaKey, encodeMeta(m))
	})
	if err == nil {
		b.forget(stored)
	}
	return err
}

// Delete implements Store. It also removes whatever else is stored under
// the session's id, so a corrupt session can always be deleted, and any
// index entry naming the session: when the session is missing or its
// header or meta does not decode, it finds them by scanning the index.
func (b *boltStore) Delete(ctx context.Context, sessionID string) error {
	if err := b.enterWrite(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	// A deferred session is dropped in the transaction's turn, so that a
	// write ordered before the Delete stores it and one after finds none.
	// (The transaction may run this again: what it dropped stays found.)
	dropped := false
	return b.update(ctx, func(tx *bolt.Tx) error {
		all, children, err := indexesOf(tx)
		if err != nil {
			return err
		}
		key := []byte(sessionID)
		if dropped = b.dropDeferred(sessionID) || dropped; dropped && !has(all, key) {
			return nil // never stored: nothing in the file names it
		}
		found := true
		indexed := false
		switch sb := all.Bucket(key); {
		case sb != nil:
			if h, m, err := readHead(sessionID, sb); err == nil {
				indexed = true
				if h.ParentSessionID != "" {
					if err := children.Delete(childKey(h.ParentSessionID, m.Created)); err != nil {
						return err
					}
				}
			}
			if err := all.DeleteBucket(key); err != nil {
				return err
			}
		case has(all, key):
			if err := all.Delete(key); err != nil {
				return err
			}
		default:
			found = false
		}
		if !indexed {
			n, err := dropIndexEntries(children, key)
			if err != nil {
				return err
			}
			found = found || n > 0
		}
		if !found {
			return fmt.Errorf("%w: %q", ErrNotFound, sessionID)
		}
		return nil
	})
}

// dropIndexEntries deletes every "children" entry naming id and returns
// how many it deleted.
func dropIndexEntries(children *bolt.Bucket, id []byte) (int, error) {
	var keys [][]byte
	c := children.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if bytes.Equal(v, id) {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		if err := children.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
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

// indexesOf returns the "sessions" and "children" buckets.
func indexesOf(tx *bolt.Tx) (all, children *bolt.Bucket, err error) {
	if all, err = topBucket(tx, sessionsBucket); err != nil {
		return nil, nil, err
	}
	if children, err = topBucket(tx, childrenBucket); err != nil {
		return nil, nil, err
	}
	return all, children, nil
}

// topBucket returns a top-level bucket, which OpenBolt creates.
func topBucket(tx *bolt.Tx, name []byte) (*bolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("%w: the %q bucket is missing", ErrCorrupt, name)
	}
	return b, nil
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
	all, err := topBucket(tx, sessionsBucket)
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

// childPrefix is the start of every "children" key of parent: its length
// as a uvarint, then parent. A uvarint is prefix-free, so no other
// parent's keys share it.
func childPrefix(parent string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(parent))), parent...)
}

func childKey(parent string, created uint64) []byte {
	return binary.BigEndian.AppendUint64(childPrefix(parent), created)
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}
