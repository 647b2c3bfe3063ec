package persistence

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltReport is what CheckBolt or RepairBolt found in a store file.
type BoltReport struct {
	// Found counts the sessions found in the file, whole or not.
	// Sessions and Tasks count the sessions and tasks that read back
	// whole: the ones RepairBolt copies.
	Found, Sessions, Tasks int
	// Pages lists damage in bbolt's own pages, the file's structure
	// (at most 20 problems past the meta pages').
	Pages []error
	// Damaged lists the sessions and tasks that do not read back whole,
	// each a *CorruptError naming one (Load's error for a session), and
	// entries of the children index that do not match their session.
	Damaged []error
}

// OK reports whether nothing is damaged.
func (r BoltReport) OK() bool { return len(r.Pages) == 0 && len(r.Damaged) == 0 }

// CheckBolt verifies the store file at path without writing to it: both
// meta pages (a damaged one, which bbolt skips for the commit before it,
// is named with what that loses), bbolt's pages (checkPages, then bbolt's
// own consistency check), then every session as Load reads it (frames,
// checksums, decoding, layout), the children index and every task. When
// the tree is damaged, bbolt's cursors are not trusted: sessions are found
// by reading every leaf page the tree reaches or the freelist does not
// name (see scanPages), and each is checked as Load would check it, in a
// scratch file in the temporary directory. It opens the file as
// OpenBoltReadOnly does, so it fails at once while a writer holds the
// file. An error means the file could not be checked at all (not a bbolt
// database, both meta pages damaged, locked, missing, or ErrEmpty: it
// never held a commit); damage found is in the report.
func CheckBolt(ctx context.Context, path string) (BoltReport, error) {
	b, err := openBolt(path, openCheck, nil)
	if err != nil {
		return BoltReport{}, err
	}
	defer b.Close()
	return b.scan(ctx, nil)
}

// RepairBolt checks the store file at path as CheckBolt does and, if
// anything is damaged, copies every session and task that reads back whole,
// byte for byte (with its sequence numbers, creation order and compaction
// marks), into a fresh file, rebuilds the children index from the copied
// headers, and swaps the fresh file in at path. The damaged file stays
// beside it, under the returned name (path.damaged-TIME, in UTC); nothing
// is swapped, and backup is empty, when nothing was damaged. The report
// says what could not be copied.
//
// While it runs, its shared lock on the file keeps writers (OpenBolt)
// out; one that was already waiting for the lock when the file was
// swapped fails instead of writing to the damaged file (see OpenBolt).
func RepairBolt(ctx context.Context, path string) (report BoltReport, backup string, err error) {
	b, err := openBolt(path, openCheck, nil)
	if err != nil {
		return BoltReport{}, "", err
	}
	defer b.Close()
	fresh := path + ".repair"
	if err := os.Remove(fresh); err != nil && !errors.Is(err, os.ErrNotExist) {
		return BoltReport{}, "", fmt.Errorf("persistence: repair %q: %w", path, err)
	}
	dst, err := bolt.Open(fresh, 0o600, &bolt.Options{Timeout: boltOpenTimeout, NoSync: true})
	if err != nil {
		return BoltReport{}, "", fmt.Errorf("persistence: repair %q: %w", path, err)
	}
	c := &copier{dst: dst}
	err = dst.Update(prepare)
	if err == nil {
		report, err = b.scan(ctx, c)
	}
	if err == nil {
		err = c.finish()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil && report.OK() {
		err = os.Remove(fresh)
		return report, "", err
	}
	if err == nil {
		backup, err = swap(path, fresh, path+".damaged-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	if err != nil {
		_ = os.Remove(fresh)
		return BoltReport{}, "", fmt.Errorf("persistence: repair %q: %w", path, err)
	}
	return report, backup, nil
}

// swap keeps the file at path under the name backup (with a number added
// if that is taken), moves fresh to path, and returns the name it kept
// the old file under. path names a file at every moment (a hard link,
// then a rename over it), so a store opened meanwhile never creates an
// empty one there.
func swap(path, fresh, backup string) (string, error) {
	name := backup
	for n := 2; ; n++ {
		err := os.Link(path, name)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || n > 100 {
			return "", err
		}
		name = fmt.Sprintf("%s-%d", backup, n)
	}
	if err := os.Rename(fresh, path); err != nil {
		return "", err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	defer dir.Close()
	return name, dir.Sync()
}

// scan checks everything in b (see CheckBolt) and hands each session and
// task that reads back whole to c, when c is not nil.
func (b *boltStore) scan(ctx context.Context, c *copier) (BoltReport, error) {
	if err := b.enter(ctx); err != nil {
		return BoltReport{}, err
	}
	defer b.mu.RUnlock()
	r := BoltReport{Pages: slices.Clone(b.metaDamage)}
	var w *pageWalk
	if err := b.guard(func() error {
		var problems []error
		w, problems = checkStructure(b.db, b.file, true)
		r.Pages = append(r.Pages, problems...)
		return nil
	}); err != nil {
		r.Pages = append(r.Pages, err)
	}
	if w == nil || w.treeDamaged {
		return r, b.scanPages(ctx, w, &r, c)
	}
	for _, id := range b.sessionIDs(&r) {
		if err := ctx.Err(); err != nil {
			return BoltReport{}, err
		}
		var s *copied
		err := b.view(id, func(tx *bolt.Tx) error {
			sb, err := existingSession(tx, id)
			if err != nil {
				return err
			}
			_, m, err := readHead(id, sb)
			if err != nil {
				return err
			}
			if _, err := readEntries(id, sb, m, 0); err != nil {
				return err
			}
			if c != nil {
				s = copyOut(id, sb)
			}
			return nil
		})
		if s != nil {
			var failed error
			if err, failed = c.write(s); failed != nil {
				return BoltReport{}, failed
			}
		}
		switch {
		case errors.Is(err, ErrNotFound):
			// Named by a stale index entry only: checkIndex reports it.
		case err != nil:
			r.Found++
			r.Damaged = append(r.Damaged, err)
		default:
			r.Found++
			r.Sessions++
		}
	}
	b.checkIndex(&r)
	b.checkTasks(&r, c)
	return r, nil
}

// scanPages finds the sessions of a file whose tree is damaged without
// bbolt's cursors, which a damaged tree can send round a loop: it reads
// every page that the walk w reached or that the freelist does not name
// (a page the damaged tree lost is one of those; a free page may hold a
// session deleted since), each once, and every session bucket on their
// leaves. Each version of a session found goes through c (a scratch file
// when c is nil), which checks it as Load would; the newest that reads
// back whole is kept, and a session none of whose versions does is named.
// The tasks are read from the root bucket's "tasks" bucket.
func (b *boltStore) scanPages(ctx context.Context, w *pageWalk, r *BoltReport, c *copier) error {
	if w == nil {
		return nil // bbolt panicked on the file: r.Pages says so
	}
	if c == nil {
		scratch, err := newScratch()
		if err != nil {
			return err
		}
		defer scratch.discard()
		c = scratch
	}
	found := map[string]*sessionVersions{}
	for id := uint64(2); id < w.pages; id++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if w.free[id] && !w.reached[id] {
			continue
		}
		p, err := w.load(id, nil)
		if err != nil || native.Uint16(p[8:]) != leafPage {
			continue // the walk named what is wrong with a page it reached
		}
		id += uint64(native.Uint32(p[12:])) // its overflow pages are data
		if kvs, err := leafElements(p); err == nil {
			w.collect(kvs, found)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(found)) {
		v := found[id]
		r.Found++
		kept := false
		// The newest first: a log only grows, until a Compact.
		slices.SortStableFunc(v.versions, func(a, b *copied) int { return cmp.Compare(b.seq, a.seq) })
		for _, s := range v.versions {
			damage, err := c.write(s)
			if err != nil {
				return err
			}
			if damage == nil {
				kept = true
				break
			}
			v.err = cmp.Or(v.err, damage)
		}
		if kept {
			r.Sessions++
		} else {
			r.Damaged = append(r.Damaged, v.err)
		}
	}
	if err := w.rawTasks(r, c); err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("listing the tasks: %w", err))
	}
	return nil
}

// sessionVersions is what scanPages found of one session: every version
// it read, and the first error of one it could not.
type sessionVersions struct {
	versions []*copied
	err      error
}

// collect adds the sessions among the leaf elements kvs to found, and
// those of the buckets inlined there. A top-level bucket with pages of
// its own is passed over: its pages are read one by one.
func (w *pageWalk) collect(kvs []rawKV, found map[string]*sessionVersions) {
	for _, kv := range kvs {
		if !kv.bucket {
			continue
		}
		if len(kv.value) < bucketHeader || (native.Uint64(kv.value) != 0 && topLevel(kv.key)) {
			continue
		}
		inner, seq, err := w.rawBucket(kv.value)
		id := string(kv.key)
		s, isSession := sessionOfRaw(id, inner, seq)
		switch {
		case err == nil && !isSession:
			w.collect(inner, found) // an inline "sessions" bucket
			continue
		case topLevel(kv.key):
			continue
		case found[id] == nil:
			found[id] = &sessionVersions{}
		}
		if err != nil {
			err = &CorruptError{SessionID: id, Part: "layout", Err: err}
			found[id].err = cmp.Or(found[id].err, err)
			continue
		}
		found[id].versions = append(found[id].versions, s)
	}
}

// topLevel reports whether key names one of the file's top-level buckets.
func topLevel(key []byte) bool {
	return bytes.Equal(key, sessionsBucket) || bytes.Equal(key, childrenBucket) || bytes.Equal(key, tasksBucket)
}

// sessionOfRaw returns the bucket elements kvs, with sequence seq, as a
// session to copy when they hold a header and a meta.
func sessionOfRaw(id string, kvs []rawKV, seq uint64) (*copied, bool) {
	s := &copied{id: id, seq: seq}
	header, meta := false, false
	for _, kv := range kvs {
		header = header || bytes.Equal(kv.key, headerKey) && !kv.bucket
		meta = meta || bytes.Equal(kv.key, metaKey) && !kv.bucket
		s.kvs = append(s.kvs, [2][]byte{bytes.Clone(kv.key), bytes.Clone(kv.value)})
		s.buckets = s.buckets || kv.bucket
	}
	return s, header && meta
}

// rawTasks reads the tasks from the root bucket's "tasks" bucket, handing
// the good ones to c.
func (w *pageWalk) rawTasks(r *BoltReport, c *copier) error {
	root := make([]byte, bucketHeader)
	native.PutUint64(root, w.root)
	top, _, err := w.rawBucket(root)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(top, func(kv rawKV) bool { return kv.bucket && bytes.Equal(kv.key, tasksBucket) })
	if i < 0 || len(top[i].value) < bucketHeader {
		return fmt.Errorf("%w: the %q bucket is missing", ErrCorrupt, tasksBucket)
	}
	tasks, _, err := w.rawBucket(top[i].value)
	if err != nil {
		return err
	}
	for _, kv := range tasks {
		c.task(r, kv.key, kv.value)
	}
	return nil
}

// sessionIDs lists the ids in the "sessions" bucket and, so that a damaged
// page of that bucket loses as few sessions as it can, the ones the
// children index names. What it cannot read goes to r.
func (b *boltStore) sessionIDs(r *BoltReport) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(id []byte) {
		if !seen[string(id)] {
			seen[string(id)] = true
			ids = append(ids, string(id))
		}
	}
	err := b.view("", func(tx *bolt.Tx) error {
		all, err := topBucket(tx, sessionsBucket)
		if err != nil {
			return err
		}
		cur := all.Cursor()
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			add(k) // a plain value is reported by the session's check
		}
		return nil
	})
	if err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("listing the sessions: %w", err))
	}
	err = b.view("", func(tx *bolt.Tx) error {
		children, err := topBucket(tx, childrenBucket)
		if err != nil {
			return err
		}
		cur := children.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if v != nil {
				add(v)
			}
		}
		return nil
	})
	if err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("listing the children index: %w", err))
	}
	return ids
}

// checkIndex reports each "children" entry that does not match its
// session, as Children does.
func (b *boltStore) checkIndex(r *BoltReport) {
	err := b.view("", func(tx *bolt.Tx) error {
		all, children, err := indexesOf(tx)
		if err != nil {
			return err
		}
		cur := children.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			id := string(v)
			stale := func(why string) {
				r.Damaged = append(r.Damaged, &CorruptError{SessionID: id, Part: "layout", Err: fmt.Errorf("index entry %q: %s", k, why)})
			}
			sb, err := sessionOf(all, id)
			if v == nil || err != nil || sb == nil {
				stale("no session to match")
				continue
			}
			h, m, err := readHead(id, sb)
			if err != nil {
				continue // the session's own check reported it
			}
			if !bytes.Equal(k, childKey(h.ParentSessionID, m.Created)) {
				stale("it does not match the session")
			}
		}
		return nil
	})
	if err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("checking the children index: %w", err))
	}
}

// checkTasks decodes every task, handing the good ones to c.
func (b *boltStore) checkTasks(r *BoltReport, c *copier) {
	err := b.viewTasks(func(tasks *bolt.Bucket) error {
		cur := tasks.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			c.task(r, k, v)
		}
		return nil
	})
	if err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("listing the tasks: %w", err))
	}
}

// copier writes what RepairBolt copies into the fresh file: each session
// in a transaction of its own, as soon as it has been read whole, then
// the tasks; fsynced once at the end. A scratch copier (see newScratch)
// only checks what it is given, and keeps nothing.
type copier struct {
	dst     *bolt.DB
	tasks   [][2][]byte
	scratch bool
}

// newScratch is a copier on a scratch file in the temporary directory,
// which discard removes.
func newScratch() (*copier, error) {
	f, err := os.CreateTemp("", "subactor-check-*.db")
	if err != nil {
		return nil, fmt.Errorf("persistence: check: scratch file: %w", err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name()) // bbolt creates it afresh
	dst, err := bolt.Open(f.Name(), 0o600, &bolt.Options{Timeout: boltOpenTimeout, NoSync: true})
	if err == nil {
		err = dst.Update(prepare)
	}
	if err != nil {
		if dst != nil {
			_ = dst.Close()
		}
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("persistence: check: scratch file: %w", err)
	}
	return &copier{dst: dst, scratch: true}, nil
}

// discard closes and removes a scratch copier's file.
func (c *copier) discard() {
	_ = c.dst.Close()
	_ = os.Remove(c.dst.Path())
}

// task counts the task k with value v in r, if it decodes, and keeps it
// for the fresh file; otherwise r names it.
func (c *copier) task(r *BoltReport, k, v []byte) {
	if _, err := decodeTask(string(k), v); err != nil {
		r.Damaged = append(r.Damaged, err)
		return
	}
	r.Tasks++
	if c != nil && !c.scratch {
		c.tasks = append(c.tasks, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
	}
}

// copied is a session's bucket as read from the damaged file: its
// sequence and every key and value, copied out.
type copied struct {
	id  string
	seq uint64
	kvs [][2][]byte
	// buckets is set when the bucket holds a nested bucket, which no
	// session does.
	buckets bool
}

// copyOut copies session id, whose bucket sb has been read whole, out of
// the damaged file.
func copyOut(id string, sb *bolt.Bucket) *copied {
	s := &copied{id: id, seq: sb.Sequence()}
	cur := sb.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		s.kvs = append(s.kvs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
	}
	return s
}

// write writes s into the fresh file, with its index entry, and checks
// that it reads back whole there, as Load would: a session that does not
// is not written, and damage says why. The "sessions" bucket's sequence
// stays past every creation number. err is a failure of the fresh file.
func (c *copier) write(s *copied) (damage, err error) {
	tx, err := c.dst.Begin(true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if damage = copyInto(tx, s); damage != nil || c.scratch {
		return damage, nil
	}
	return nil, tx.Commit()
}

// copyInto writes s into tx and reads it back.
func copyInto(tx *bolt.Tx, s *copied) error {
	corrupt := func(err error) error { return &CorruptError{SessionID: s.id, Part: "layout", Err: err} }
	if s.buckets {
		return corrupt(errors.New("a nested bucket in the session's bucket"))
	}
	all, children, err := indexesOf(tx)
	if err != nil {
		return err
	}
	sb, err := all.CreateBucket([]byte(s.id))
	if err != nil {
		return corrupt(err)
	}
	for _, kv := range s.kvs {
		if err := sb.Put(kv[0], kv[1]); err != nil {
			return corrupt(err)
		}
	}
	if err := sb.SetSequence(s.seq); err != nil {
		return err
	}
	h, m, err := readHead(s.id, sb)
	if err != nil {
		return err
	}
	if _, err := readEntries(s.id, sb, m, 0); err != nil {
		return err
	}
	if err := all.SetSequence(max(all.Sequence(), m.Created)); err != nil {
		return err
	}
	if h.ParentSessionID == "" {
		return nil
	}
	return children.Put(childKey(h.ParentSessionID, m.Created), []byte(s.id))
}

// finish writes the tasks and syncs the file.
func (c *copier) finish() error {
	err := c.dst.Update(func(tx *bolt.Tx) error {
		tasks, err := topBucket(tx, tasksBucket)
		if err != nil {
			return err
		}
		for _, kv := range c.tasks {
			if err := tasks.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.dst.Sync()
}
