package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/boltdamage"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// TestBoltReadOnlyRefusesAnOldLayout: a read-only store cannot bring a
// file from before the children index up to date, so it refuses it and
// says how to, changing nothing.
func TestBoltReadOnlyRefusesAnOldLayout(t *testing.T) {
	path := boltPath(t)
	writeOldFile(t, path, nil, map[string][]byte{"a": headerValue(t, hdr("a"))})
	before, _ := os.ReadFile(path)
	if _, err := persistence.OpenBoltReadOnly(path); err == nil || !strings.Contains(err.Error(), "open it for writing once to bring it up to date") {
		t.Fatalf("OpenBoltReadOnly of an old file: got %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("a read-only open changed the file")
	}
}

// contents is everything a store holds, as its calls return it.
type contents struct {
	order    []string // Sessions, in creation order
	sessions map[string]sessionContents
	tasks    map[string][]persistence.TaskRecord // by parent
}

type sessionContents struct {
	header   subagent.SessionHeader
	entries  []persistence.Entry
	lastSeq  uint64
	children []string
}

// contentsOf reads everything s holds.
func contentsOf(t *testing.T, s persistence.Backend) contents {
	t.Helper()
	ctx := t.Context()
	infos, err := s.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	c := contents{sessions: map[string]sessionContents{}, tasks: map[string][]persistence.TaskRecord{}}
	for _, info := range infos {
		id := info.Header.SessionID
		c.order = append(c.order, id)
		h, entries, err := s.LoadFrom(ctx, id, 0)
		if err != nil {
			t.Fatalf("LoadFrom(%s): %v", id, err)
		}
		kids, err := s.Children(ctx, id)
		if err != nil {
			t.Fatalf("Children(%s): %v", id, err)
		}
		tasks, err := s.ListTasks(ctx, id)
		if err != nil {
			t.Fatalf("ListTasks(%s): %v", id, err)
		}
		if len(tasks) > 0 {
			c.tasks[id] = tasks
		}
		c.sessions[id] = sessionContents{header: h, entries: entries, lastSeq: info.LastSeq, children: ids(kids)}
	}
	return c
}

// fill writes a store worth repairing to path and closes it: top-level
// sessions, children in the index, a compacted log, tasks, a deleted
// session, and enough commits for bbolt to have free pages. It returns
// what the store holds.
func fill(t *testing.T, path string) contents {
	t.Helper()
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 6 {
		top := fmt.Sprint("top", i)
		if err := s.Create(ctx, subagent.SessionHeader{SessionID: top}); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			kid := subagent.SessionHeader{SessionID: fmt.Sprintf("kid%d.%d", i, j), ParentSessionID: top, DelegationDepth: 1}
			if _, err := s.CreateWith(ctx, kid, msg(`"prompt"`)); err != nil {
				t.Fatal(err)
			}
		}
		for j := range 12 {
			appendRecs(t, s, top, msg(fmt.Sprintf(`{"turn":%d,"text":"%0200d"}`, j, i)))
		}
		if err := s.PutTask(ctx, persistence.TaskRecord{ID: fmt.Sprint("task", i), ParentSessionID: top, State: "done", UpdatedAt: time.Unix(int64(i), 0).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx, "top0", 6, msg(`"summary"`)); err != nil {
		t.Fatal(err)
	}
	create(t, s, "gone")
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	c := contentsOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return c
}

// wantRepaired repairs path and checks that the store then holds want,
// that the damaged file is kept beside it byte for byte, and that the
// repaired store takes writes where its logs ended.
func wantRepaired(t *testing.T, path string, want contents) persistence.BoltReport {
	t.Helper()
	damagedFile, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	report, backup, err := persistence.RepairBolt(t.Context(), path)
	if err != nil {
		t.Fatalf("RepairBolt: %v", err)
	}
	if kept, err := os.ReadFile(backup); err != nil || !bytes.Equal(kept, damagedFile) || !strings.HasPrefix(backup, path+".damaged-") {
		t.Fatalf("the damaged file is not kept as it was at %q: %v", backup, err)
	}
	if _, err := os.Stat(path + ".repair"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the repair's own file is left behind: %v", err)
	}
	s := openBolt(t, path)
	if got := contentsOf(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("after repair the store holds\n%+v\nwant\n%+v", got, want)
	}
	for _, id := range want.order {
		if _, err := s.AppendAt(t.Context(), id, want.sessions[id].lastSeq, msg(`"after repair"`)); err != nil {
			t.Fatalf("AppendAt(%s) after repair: %v", id, err)
		}
	}
	return report
}

// TestK3_BoltFreelistBitFlipIsRefusedAndRepaired flips one bit of bbolt's
// freelist, which makes bbolt hand out pages in use (writes then lost
// other sessions without an error) or panic in its commit: OpenBolt
// refuses the file with a *CorruptError naming it and what to do, before
// writing anything; CheckBolt finds the damage in the pages and every
// session and task intact; RepairBolt copies every one of them, exactly.
func TestK3_BoltFreelistBitFlipIsRefusedAndRepaired(t *testing.T) {
	// Low bits make another page free (one in use, or one free twice),
	// high ones a page past the file's end.
	for _, bit := range []int{0, 1, 3, 7, 12, 40, 63, 64 + 2} {
		t.Run(fmt.Sprint("bit", bit), func(t *testing.T) {
			path := boltPath(t)
			want := fill(t, path)
			if err := boltdamage.FlipFreelistBit(path, bit); err != nil {
				t.Fatal(err)
			}
			flipped, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = persistence.OpenBolt(path)
			var ce *persistence.CorruptError
			if !errors.As(err, &ce) || ce.File != path || ce.SessionID != "" || !strings.Contains(err.Error(), "node check -repair") {
				t.Fatalf("OpenBolt: got %v, want a *CorruptError naming the file and the repair", err)
			}
			t.Log(err)
			if after, _ := os.ReadFile(path); !bytes.Equal(after, flipped) {
				t.Fatal("OpenBolt wrote to the damaged file")
			}

			report, err := persistence.CheckBolt(t.Context(), path)
			if err != nil {
				t.Fatalf("CheckBolt: %v", err)
			}
			if report.OK() || len(report.Pages) == 0 || len(report.Damaged) > 0 || report.Sessions != len(want.order) || report.Tasks != 6 {
				t.Fatalf("CheckBolt: got %+v, want damaged pages and all %d sessions and 6 tasks whole", report, len(want.order))
			}
			report = wantRepaired(t, path, want)
			if report.Sessions != len(want.order) || len(report.Damaged) > 0 {
				t.Fatalf("RepairBolt report: %+v", report)
			}
		})
	}
}

// TestK3_BoltDamagedSessionsAndTasksAreLeftBehindByRepair: CheckBolt names
// each session and task that does not read back whole and each stale
// index entry, and RepairBolt copies everything else; a file with nothing
// damaged is left alone.
func TestK3_BoltDamagedSessionsAndTasksAreLeftBehindByRepair(t *testing.T) {
	path := boltPath(t)
	want := fill(t, path)
	if report, backup, err := persistence.RepairBolt(t.Context(), path); err != nil || !report.OK() || backup != "" {
		t.Fatalf("RepairBolt of a sound file: %+v, %q, %v; want nothing to do", report, backup, err)
	}
	reachTx(t, path, func(tx *bolt.Tx) error {
		kid := tx.Bucket([]byte("sessions")).Bucket([]byte("kid3.1"))
		v := bytes.Clone(kid.Get(seqKey(1)))
		v[len(v)-1] ^= 1
		if err := kid.Put(seqKey(1), v); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("tasks")).Put([]byte("task2"), []byte("garbage")); err != nil {
			return err
		}
		// An index entry whose session is gone.
		return tx.Bucket([]byte("children")).Put([]byte("\x04top1\x00\x00\x00\x00\x00\x00\x00\x63"), []byte("nobody"))
	})
	report, err := persistence.CheckBolt(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	var damaged []string
	for _, err := range report.Damaged {
		var ce *persistence.CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("damage %v is not a *CorruptError", err)
		}
		damaged = append(damaged, ce.SessionID+ce.TaskID)
	}
	slices.Sort(damaged)
	if len(report.Pages) > 0 || !slices.Equal(damaged, []string{"kid3.1", "nobody", "task2"}) || report.Sessions != len(want.order)-1 || report.Tasks != 5 {
		t.Fatalf("CheckBolt: %+v (damaged %q), want kid3.1, task2 and the stale entry for nobody", report, damaged)
	}
	// What repair cannot copy is gone from the repaired store.
	want.order = slices.DeleteFunc(want.order, func(id string) bool { return id == "kid3.1" })
	delete(want.sessions, "kid3.1")
	top3 := want.sessions["top3"]
	top3.children = []string{"kid3.0"}
	want.sessions["top3"] = top3
	delete(want.tasks, "top2")
	if report := wantRepaired(t, path, want); len(report.Damaged) != 3 {
		t.Fatalf("RepairBolt report: %+v", report)
	}
}

// TestK3_BoltPanicWhileWritingFailsTheStoreNotTheProcess: bbolt panics when
// a write meets a damaged page, in the write itself or in its commit (here
// the freelist page's header is damaged under a live store, which bbolt's
// commit meets when it frees that page). With writers in flight, every
// write fails with a *CorruptError naming the file or has been
// acknowledged, the process goes on, every later call is refused, Close
// returns, and the repaired file holds exactly the acknowledged writes.
func TestK3_BoltPanicWhileWritingFailsTheStoreNotTheProcess(t *testing.T) {
	for _, where := range []string{"write", "commit"} {
		t.Run(where, func(t *testing.T) {
			path := boltPath(t)
			s := openBolt(t, path)
			const writers = 8
			want := map[string][]persistence.Record{}
			for w := range writers {
				id := fmt.Sprint("w", w)
				create(t, s, id)
				want[id] = nil
			}
			breakIt := func() {
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				at, _, err := boltdamage.FreelistPage(f)
				if err != nil {
					t.Fatal(err)
				}
				// The page's id, 0: bbolt panics when asked to free page 0.
				if _, err := f.WriteAt(make([]byte, 8), at); err != nil {
					t.Fatal(err)
				}
			}
			if where == "write" {
				breakIt = func() {
					persistence.SetPutHook(s, func(uint64) error { panic("a damaged page") })
				}
			}
			// Each writer acknowledges one write, waits for the damage,
			// then writes until a write fails: those writes arrive
			// together and share commits.
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				failed  = map[string]error{}
				written = make(chan struct{}, writers)
				broken  = make(chan struct{})
			)
			for w := range writers {
				id := fmt.Sprint("w", w)
				wg.Go(func() {
					for n := 0; ; n++ {
						r := msg(fmt.Sprint(n))
						if err := s.Append(context.Background(), id, r); err != nil {
							mu.Lock()
							failed[id] = err
							mu.Unlock()
							return
						}
						mu.Lock()
						want[id] = append(want[id], r)
						mu.Unlock()
						if n == 0 {
							written <- struct{}{}
							<-broken
						}
					}
				})
			}
			for range writers {
				testkit.Recv(t, written, "each writer's first write")
			}
			breakIt()
			close(broken)
			wg.Wait()
			if len(failed) != writers {
				t.Fatalf("%d writers of %d failed", len(failed), writers)
			}
			for id, err := range failed {
				var ce *persistence.CorruptError
				if !errors.As(err, &ce) || ce.File != path || !strings.Contains(err.Error(), "panicked while writing") {
					t.Fatalf("writer %s: got %v, want a *CorruptError for the file", id, err)
				}
			}
			if _, err := s.Sessions(t.Context()); !errors.Is(err, persistence.ErrCorrupt) {
				t.Fatalf("Sessions after the panic: got %v, want the store's failure", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if where == "commit" {
				if _, err := persistence.OpenBolt(path); !errors.Is(err, persistence.ErrCorrupt) {
					t.Fatalf("OpenBolt of the damaged file: got %v, want ErrCorrupt", err)
				}
				if _, _, err := persistence.RepairBolt(t.Context(), path); err != nil {
					t.Fatal(err)
				}
			}
			s = openBolt(t, path)
			for id, recs := range want {
				wantLog(t, s, id, recs...)
			}
		})
	}
}

// TestBoltReadOnlyNeverWrites: OpenBoltReadOnly opens the file O_RDONLY and
// creates nothing; every read works, every write is ErrReadOnly, and the
// file is byte for byte and to the nanosecond of its time as it was.
// Readers share the file; a writer keeps them out and they fail at once,
// not after the writer's wait; a reader keeps a writer out.
func TestBoltReadOnlyNeverWrites(t *testing.T) {
	path := boltPath(t)
	want := fill(t, path)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var flags []int
	s, err := persistence.OpenBoltReadOnlyWithFile(path, func(name string, flag int, perm os.FileMode) (*os.File, error) {
		flags = append(flags, flag)
		return os.OpenFile(name, flag, perm)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(flags) != 1 || flags[0] != os.O_RDONLY {
		t.Fatalf("opened with flags %#o, want O_RDONLY alone", flags)
	}
	if got := contentsOf(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("read-only store holds\n%+v\nwant\n%+v", got, want)
	}
	if _, err := s.GetTask(t.Context(), "task1"); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, createWith := s.CreateWith(ctx, hdr("new"), msg(`1`))
	_, appendAt := s.AppendAt(ctx, "top1", 12, msg(`2`))
	for name, err := range map[string]error{
		"Create": s.Create(ctx, hdr("new")), "CreateWith": createWith, "Append": s.Append(ctx, "top1", msg(`1`)),
		"AppendAt": appendAt, "Compact": s.Compact(ctx, "top1", 3, msg(`"s"`)), "Delete": s.Delete(ctx, "top1"),
		"PutTask":    s.PutTask(ctx, persistence.TaskRecord{ID: "t", ParentSessionID: "top1", State: "x"}),
		"DeleteTask": s.DeleteTask(ctx, "task1"),
	} {
		if !errors.Is(err, persistence.ErrReadOnly) {
			t.Errorf("%s: got %v, want ErrReadOnly", name, err)
		}
	}

	second, err := persistence.OpenBoltReadOnly(path)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := persistence.OpenBolt(path); !errors.Is(err, berrors.ErrTimeout) {
		t.Fatalf("a writer beside a reader: got %v, want the lock's timeout", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("reading changed the file")
	}
	if now, _ := os.Stat(path); !now.ModTime().Equal(stat.ModTime()) {
		t.Fatalf("reading touched the file: modified %v, was %v", now.ModTime(), stat.ModTime())
	}

	openBolt(t, path)
	began := time.Now()
	_, err = persistence.OpenBoltReadOnly(path)
	if !errors.Is(err, berrors.ErrTimeout) {
		t.Fatalf("a reader beside a writer: got %v, want the lock's timeout", err)
	}
	// A writer waits a second for the lock; a reader gives up at its
	// first try.
	if took := time.Since(began); took >= 900*time.Millisecond {
		t.Fatalf("a reader beside a writer waited %v", took)
	}

	missing := boltPath(t)
	if _, err := persistence.OpenBoltReadOnly(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenBoltReadOnly of a missing file: got %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("OpenBoltReadOnly created the file")
	}
}

// TestK4_BoltMetaBitFlipIsNamedWithTheCommitItLoses: one bit flipped in
// the current meta page makes bbolt read the commit before it without a
// word. A store opened on the file reads that older commit and names the
// damage (OpenDamage); CheckBolt names it with the transaction the store
// reads and the one lost, and finds every session of the older commit
// whole; RepairBolt keeps them all.
func TestK4_BoltMetaBitFlipIsNamedWithTheCommitItLoses(t *testing.T) {
	path := boltPath(t)
	want := fill(t, path)
	s := openBolt(t, path)
	create(t, s, "last") // the last commit, which the flip loses
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	page, txid, err := boltdamage.FlipMetaBit(path)
	if err != nil {
		t.Fatal(err)
	}
	words := fmt.Sprintf("meta page %d is damaged (its checksum does not match): the store reads transaction %d, the last commit (transaction %d) is lost", page, txid-1, txid)

	r, err := persistence.OpenBoltReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if damage := r.(interface{ OpenDamage() []error }).OpenDamage(); len(damage) != 1 || damage[0].Error() != words {
		t.Fatalf("OpenDamage: %v, want %q", damage, words)
	}
	if got := contentsOf(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("the damaged store reads\n%+v\nwant the commit before the last\n%+v", got, want)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	report, err := persistence.CheckBolt(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if report.OK() || len(report.Pages) != 1 || report.Pages[0].Error() != words || len(report.Damaged) > 0 ||
		report.Found != len(want.order) || report.Sessions != len(want.order) {
		t.Fatalf("CheckBolt: %+v, want the meta page named and all %d sessions whole", report, len(want.order))
	}
	if report := wantRepaired(t, path, want); report.Found != report.Sessions || len(report.Damaged) > 0 {
		t.Fatalf("RepairBolt report: %+v", report)
	}
}

// crossLinkable writes a store at path with enough sessions that the
// "sessions" bucket's root is a branch page, one of them with a damaged
// record, closes it and returns its contents without that one.
func crossLinkable(t *testing.T, path string) (want contents, damaged string) {
	t.Helper()
	s := openBolt(t, path)
	for i := range 60 {
		create(t, s, fmt.Sprintf("s%02d", i))
	}
	damaged = "s37"
	appendRecs(t, s, damaged, msg(`"to be damaged"`))
	want = contentsOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reach(t, path, func(sessions *bolt.Bucket) error {
		sb := sessions.Bucket([]byte(damaged))
		v := bytes.Clone(sb.Get(seqKey(1)))
		v[len(v)-1] ^= 1
		return sb.Put(seqKey(1), v)
	})
	want.order = slices.DeleteFunc(want.order, func(id string) bool { return id == damaged })
	delete(want.sessions, damaged)
	return want, damaged
}

// TestK4_BoltCrossLinkedBranchLosesNoSession: the "sessions" bucket's
// branch page points two elements at one leaf, so the sessions of another
// leaf are reached by no path and those of the first would be listed
// twice. Neither a read-only nor a writing store opens the file (a
// *CorruptError naming the page); CheckBolt finds every session by
// reading every leaf page, each whole one counted and the damaged one
// named; RepairBolt keeps every whole session, once.
func TestK4_BoltCrossLinkedBranchLosesNoSession(t *testing.T) {
	path := boltPath(t)
	want, damaged := crossLinkable(t, path)
	if err := boltdamage.RelinkSessionsBranch(path, 1, 0); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (persistence.Backend, error){"OpenBolt": persistence.OpenBolt, "OpenBoltReadOnly": persistence.OpenBoltReadOnly} {
		if _, err := open(path); !errors.Is(err, persistence.ErrCorrupt) || !strings.Contains(err.Error(), "reached twice") {
			t.Fatalf("%s of a cross-linked file: got %v, want a *CorruptError naming the page", name, err)
		}
	}
	report := wantDamagedSessions(t, path, len(want.order)+1, damaged)
	if len(report.Pages) == 0 {
		t.Fatalf("CheckBolt names no damaged page: %+v", report)
	}
	if report := wantRepaired(t, path, want); report.Found != len(want.order)+1 || report.Sessions != len(want.order) || len(report.Damaged) != 1 {
		t.Fatalf("RepairBolt report: %+v", report)
	}
}

// wantDamagedSessions checks path and wants found sessions, all whole but
// the one named damaged.
func wantDamagedSessions(t *testing.T, path string, found int, damaged string) persistence.BoltReport {
	t.Helper()
	report, err := persistence.CheckBolt(t.Context(), path)
	if err != nil {
		t.Fatalf("CheckBolt: %v", err)
	}
	var ce *persistence.CorruptError
	if report.Found != found || report.Sessions != found-1 || len(report.Damaged) != 1 || !errors.As(report.Damaged[0], &ce) || ce.SessionID != damaged {
		t.Fatalf("CheckBolt: %+v, want %d sessions found, all whole but %s", report, found, damaged)
	}
	return report
}

// TestK4_BoltBranchLoopIsBoundedAndNamed: a branch page that points at
// itself sends bbolt's cursor round a loop for ever. No open reads
// through it, and CheckBolt and RepairBolt read each page once: they end,
// name the damage, and keep every session.
func TestK4_BoltBranchLoopIsBoundedAndNamed(t *testing.T) {
	path := boltPath(t)
	want, damaged := crossLinkable(t, path)
	if err := boltdamage.RelinkSessionsBranch(path, 1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := persistence.OpenBoltReadOnly(path); !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("OpenBoltReadOnly of a looping tree: got %v, want ErrCorrupt", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := persistence.CheckBolt(context.Background(), path)
		done <- err
	}()
	if err := testkit.Recv(t, done, "CheckBolt of a looping tree"); err != nil {
		t.Fatal(err)
	}
	wantDamagedSessions(t, path, len(want.order)+1, damaged)
	wantRepaired(t, path, want)
}

// TestK4_BoltFileThatNeverHeldACommitIsEmpty: a node killed while it
// created its store leaves an empty file, bbolt's initialisation alone
// (no buckets), or that cut short. Each holds nothing to lose: a read-only
// open and CheckBolt say ErrEmpty and leave it as it is; OpenBolt starts
// it afresh and the store works.
func TestK4_BoltFileThatNeverHeldACommitIsEmpty(t *testing.T) {
	initOnly := func(t *testing.T, path string) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"empty", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"bucketless", initOnly},
		{"cutShort", func(t *testing.T, path string) {
			initOnly(t, path)
			if err := os.Truncate(path, 5000); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := boltPath(t)
			c.write(t, path)
			before, _ := os.ReadFile(path)
			if _, err := persistence.OpenBoltReadOnly(path); !errors.Is(err, persistence.ErrEmpty) {
				t.Fatalf("OpenBoltReadOnly: got %v, want ErrEmpty", err)
			}
			if _, err := persistence.CheckBolt(t.Context(), path); !errors.Is(err, persistence.ErrEmpty) {
				t.Fatalf("CheckBolt: got %v, want ErrEmpty", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Fatal("reading changed the file")
			}
			s := openBolt(t, path)
			create(t, s, "a")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if report, err := persistence.CheckBolt(t.Context(), path); err != nil || !report.OK() || report.Sessions != 1 {
				t.Fatalf("CheckBolt after a write: %+v, %v", report, err)
			}
		})
	}
}
