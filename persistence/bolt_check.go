package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltReport is what CheckBolt or RepairBolt found in a store file.
type BoltReport struct {
	// Sessions and Tasks count the sessions and tasks that read back
	// whole: the ones RepairBolt copies.
	Sessions, Tasks int
	// Pages lists damage in bbolt's own pages, the file's structure
	// (at most 20 problems).
	Pages []error
	// Damaged lists the sessions and tasks that do not read back whole,
	// each a *CorruptError naming one (Load's error for a session), and
	// entries of the children index that do not match their session.
	Damaged []error
}

// OK reports whether nothing is damaged.
func (r BoltReport) OK() bool { return len(r.Pages) == 0 && len(r.Damaged) == 0 }

// CheckBolt verifies the store file at path without writing to it: bbolt's
// pages (checkPages, then bbolt's own consistency check), then every
// session as Load reads it (frames, checksums, decoding, layout), the
// children index and every task. It opens the file as OpenBoltReadOnly
// does, so it fails at once while a writer holds the file. An error means
// the file could not be checked at all (not a bbolt database, both meta
// pages damaged, locked, missing); damage found is in the report.
func CheckBolt(ctx context.Context, path string) (BoltReport, error) {
	b, err := openBolt(path, true, nil)
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
	b, err := openBolt(path, true, nil)
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
	var r BoltReport
	if err := b.guard(func() error {
		r.Pages = checkStructure(b.db, b.file, true)
		return nil
	}); err != nil {
		r.Pages = append(r.Pages, err)
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
			h, m, err := readHead(id, sb)
			if err != nil {
				return err
			}
			if _, err := readEntries(id, sb, m, 0); err != nil {
				return err
			}
			if c != nil {
				s = copyOut(id, h.ParentSessionID, sb, m)
			}
			return nil
		})
		switch {
		case errors.Is(err, ErrNotFound):
			// Named by a stale index entry only: checkIndex reports it.
		case err != nil:
			r.Damaged = append(r.Damaged, err)
		default:
			r.Sessions++
			if c != nil {
				if err := c.write(s); err != nil {
					return BoltReport{}, err
				}
			}
		}
	}
	b.checkIndex(&r)
	b.checkTasks(&r, c)
	return r, nil
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
			if _, err := decodeTask(string(k), v); err != nil {
				r.Damaged = append(r.Damaged, err)
				continue
			}
			r.Tasks++
			if c != nil {
				c.tasks = append(c.tasks, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
		}
		return nil
	})
	if err != nil {
		r.Damaged = append(r.Damaged, fmt.Errorf("listing the tasks: %w", err))
	}
}

// copier writes what RepairBolt copies into the fresh file: each session
// in a transaction of its own, as soon as it has been read whole, then
// the tasks; fsynced once at the end.
type copier struct {
	dst   *bolt.DB
	tasks [][2][]byte
}

// copied is a session read whole: its meta, its bucket's sequence and
// every key and value of its bucket, copied out of the damaged file.
type copied struct {
	id     string
	parent string
	meta   sessionMeta
	seq    uint64
	kvs    [][2][]byte
}

// copyOut copies session id, whose bucket sb has been read whole, out of
// the damaged file.
func copyOut(id, parent string, sb *bolt.Bucket, m sessionMeta) *copied {
	s := &copied{id: id, parent: parent, meta: m, seq: sb.Sequence()}
	cur := sb.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		s.kvs = append(s.kvs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
	}
	return s
}

// write writes s into the fresh file, with its index entry; the
// "sessions" bucket's sequence stays past every creation number.
func (c *copier) write(s *copied) error {
	return c.dst.Update(func(tx *bolt.Tx) error {
		all, children, err := indexesOf(tx)
		if err != nil {
			return err
		}
		sb, err := all.CreateBucket([]byte(s.id))
		if err != nil {
			return err
		}
		for _, kv := range s.kvs {
			if err := sb.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		if err := sb.SetSequence(s.seq); err != nil {
			return err
		}
		if err := all.SetSequence(max(all.Sequence(), s.meta.Created)); err != nil {
			return err
		}
		if s.parent == "" {
			return nil
		}
		return children.Put(childKey(s.parent, s.meta.Created), []byte(s.id))
	})
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
