package persistence_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// newCalls makes every call added in Store v2 and TaskStore once, on
// session id, and returns their errors by name: for checks that a store
// refuses them all.
func newCalls(s persistence.Backend, id string) map[string]error {
	ctx := context.Background()
	_, createWith := s.CreateWith(ctx, hdr("new-"+id), msg(`1`))
	_, appendAt := s.AppendAt(ctx, id, 1, msg(`2`))
	_, appendAtNone := s.AppendAt(ctx, id, 1)
	_, _, loadFrom := s.LoadFrom(ctx, id, 0)
	_, header := s.Header(ctx, id)
	_, sessions := s.Sessions(ctx)
	_, children := s.Children(ctx, hdr(id).ParentSessionID)
	_, getTask := s.GetTask(ctx, "t")
	_, listTasks := s.ListTasks(ctx, id)
	return map[string]error{
		"CreateWith": createWith, "AppendAt": appendAt, "AppendAt(none)": appendAtNone,
		"LoadFrom": loadFrom, "Header": header, "Sessions": sessions, "Children": children,
		"Compact": s.Compact(ctx, id, 1, msg(`"summary"`)),
		"PutTask": s.PutTask(ctx, persistence.TaskRecord{ID: "t", ParentSessionID: id, State: "running"}),
		"GetTask": getTask, "ListTasks": listTasks, "DeleteTask": s.DeleteTask(ctx, "t"),
	}
}

func entries(t *testing.T, s persistence.Store, id string, after uint64) []persistence.Entry {
	t.Helper()
	_, got, err := s.LoadFrom(t.Context(), id, after)
	if err != nil {
		t.Fatalf("LoadFrom(%q, %d): %v", id, after, err)
	}
	return got
}

// seqs lists the sequence numbers of entries.
func seqs(entries []persistence.Entry) []uint64 {
	out := make([]uint64, len(entries))
	for i, e := range entries {
		out[i] = e.Seq
	}
	return out
}

func ids(infos []persistence.SessionInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Header.SessionID
	}
	return out
}

func wantIDs(t *testing.T, what string, infos []persistence.SessionInfo, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := ids(infos); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestBoltWriteFaultInsideTheTransaction fails a write after some of its
// records are in the transaction, as a crash in mid-write would: nothing
// of it may remain, in memory or after a reopen, and the store goes on.
func TestBoltWriteFaultInsideTheTransaction(t *testing.T) {
	injected := errors.New("injected fault")
	failAt := func(at uint64) func(uint64) error {
		return func(seq uint64) error {
			if seq == at {
				return injected
			}
			return nil
		}
	}
	five := []persistence.Record{msg(`1`), msg(`2`), msg(`3`), msg(`4`), msg(`5`)}

	t.Run("CreateWith", func(t *testing.T) {
		path := boltPath(t)
		s := openBolt(t, path)
		ctx := t.Context()
		persistence.SetPutHook(s, failAt(4))
		if _, err := s.CreateWith(ctx, hdr("a"), five...); !errors.Is(err, injected) {
			t.Fatalf("CreateWith: got %v, want the injected fault", err)
		}
		if _, err := s.Header(ctx, "a"); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("Header after a failed CreateWith: got %v, want ErrNotFound", err)
		}
		infos, err := s.Sessions(ctx)
		wantIDs(t, "Sessions", infos, err)
		infos, err = s.Children(ctx, hdr("a").ParentSessionID)
		wantIDs(t, "Children", infos, err)
		persistence.SetPutHook(s, nil)
		if seq, err := s.CreateWith(ctx, hdr("a"), five...); err != nil || seq != 5 {
			t.Fatalf("CreateWith again: got %d, %v; want 5, nil", seq, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openBolt(t, path)
		wantLog(t, s, "a", five...)
		infos, err = s.Children(t.Context(), hdr("a").ParentSessionID)
		wantIDs(t, "Children after reopen", infos, err, "a")
	})
	t.Run("AppendAt", func(t *testing.T) {
		s := openBolt(t, boltPath(t))
		ctx := t.Context()
		create(t, s, "a")
		appendRecs(t, s, "a", msg(`0`))
		persistence.SetPutHook(s, failAt(4))
		if _, err := s.AppendAt(ctx, "a", 1, five[:4]...); !errors.Is(err, injected) {
			t.Fatalf("AppendAt: got %v, want the injected fault", err)
		}
		wantLog(t, s, "a", msg(`0`))
		persistence.SetPutHook(s, nil)
		if seq, err := s.AppendAt(ctx, "a", 1, five[:4]...); err != nil || seq != 5 {
			t.Fatalf("AppendAt again: got %d, %v; want 5, nil", seq, err)
		}
	})
}

// writeOldFile writes a store file in the layout from before meta values
// and the children index: sessions bucket, header and records only.
func writeOldFile(t *testing.T, path string, logs map[string][]persistence.Record, headers map[string][]byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		all, err := tx.CreateBucket([]byte("sessions"))
		if err != nil {
			return err
		}
		for id, hv := range headers {
			sb, err := all.CreateBucket([]byte(id))
			if err != nil {
				return err
			}
			if err := sb.Put([]byte("header"), hv); err != nil {
				return err
			}
			for _, r := range logs[id] {
				seq, _ := sb.NextSequence()
				if err := sb.Put(seqKey(seq), frame(recordBody(r.Kind, string(r.Data)))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func headerValue(t *testing.T, h subagent.SessionHeader) []byte {
	body, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return frame(string(body))
}

// TestBoltOpensFilesFromBeforeMeta opens a file in the previous layout:
// its logs load unchanged, OpenBolt adds what listing needs once (in id
// order, the only order the old layout knows), and a session whose header
// is damaged is still reported and deletable.
func TestBoltOpensFilesFromBeforeMeta(t *testing.T) {
	path := boltPath(t)
	child := func(id string) subagent.SessionHeader {
		return subagent.SessionHeader{SessionID: id, ParentSessionID: "p", DelegationDepth: 1}
	}
	logs := map[string][]persistence.Record{
		"old-b": {msg(`"b1"`)},
		"old-a": {msg(`"a1"`), {Kind: "subagent/descriptor", Data: json.RawMessage(` {"version": 1} `)}},
	}
	writeOldFile(t, path, logs, map[string][]byte{
		"old-b":  headerValue(t, child("old-b")),
		"old-a":  headerValue(t, child("old-a")),
		"root":   headerValue(t, subagent.SessionHeader{SessionID: "root"}),
		"broken": []byte("not a header"),
	})

	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"old-a", "old-b"} {
		h, recs, err := s.Load(ctx, id)
		if err != nil || h != child(id) || !sameRecords(recs, logs[id]) {
			t.Fatalf("Load(%s): got %+v %v, %v", id, h, recs, err)
		}
	}
	_, err = s.Sessions(ctx)
	var ce *persistence.CorruptError
	if !errors.As(err, &ce) || ce.SessionID != "broken" || ce.Part != "header" {
		t.Fatalf("Sessions with a damaged header: got %v, want a CorruptError naming broken", err)
	}
	if err := s.Delete(ctx, "broken"); err != nil {
		t.Fatal(err)
	}
	infos, err := s.Sessions(ctx)
	wantIDs(t, "Sessions", infos, err, "old-a", "old-b", "root")
	if infos[0].LastSeq != 2 || infos[1].LastSeq != 1 || infos[2].LastSeq != 0 {
		t.Fatalf("Sessions: last sequence numbers %+v", infos)
	}
	infos, err = s.Children(ctx, "p")
	wantIDs(t, "Children(p)", infos, err, "old-a", "old-b")
	if seq, err := s.AppendAt(ctx, "old-a", 2, msg(`"a3"`)); err != nil || seq != 3 {
		t.Fatalf("AppendAt(old-a, 2): got %d, %v", seq, err)
	}
	if err := s.Create(ctx, child("new")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The records were not rewritten, and the migration does not run twice.
	reach(t, path, func(sessions *bolt.Bucket) error {
		want := frame(recordBody("subagent/descriptor", ` {"version": 1} `))
		if got := sessions.Bucket([]byte("old-a")).Get(seqKey(2)); !bytes.Equal(got, want) {
			t.Fatalf("record 2 of old-a was rewritten: %q", got)
		}
		return nil
	})
	s = openBolt(t, path)
	infos, err = s.Children(t.Context(), "p")
	wantIDs(t, "Children(p) after reopen", infos, err, "old-a", "old-b", "new")
	infos, err = s.Sessions(t.Context())
	wantIDs(t, "Sessions after reopen", infos, err, "old-a", "old-b", "root", "new")
}

// TestK3_BoltHeaderAndListingsDoNotReadRecords damages a record: Header,
// Sessions and Children still work, since they do not decode records, and
// LoadFrom fails only when it would return the damaged one.
func TestK3_BoltHeaderAndListingsDoNotReadRecords(t *testing.T) {
	s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
		b := sessions.Bucket([]byte("victim"))
		if err := b.Put(seqKey(2), []byte("garbage")); err != nil {
			t.Fatal(err)
		}
	})
	ctx := t.Context()
	if h, err := s.Header(ctx, "victim"); err != nil || h != hdr("victim") {
		t.Fatalf("Header: got %+v, %v", h, err)
	}
	infos, err := s.Sessions(ctx)
	wantIDs(t, "Sessions", infos, err, "victim", "bystander")
	if infos[0].LastSeq != 3 {
		t.Fatalf("Sessions: victim ends at %d, want 3", infos[0].LastSeq)
	}
	infos, err = s.Children(ctx, "p-victim")
	wantIDs(t, "Children", infos, err, "victim")
	if got := seqs(entries(t, s, "victim", 2)); fmt.Sprint(got) != "[3]" {
		t.Fatalf("LoadFrom(2): got %v, want [3]", got)
	}
	_, _, err = s.LoadFrom(ctx, "victim", 1)
	var ce *persistence.CorruptError
	if !errors.As(err, &ce) || ce.Part != "record" || ce.Seq != 2 {
		t.Fatalf("LoadFrom(1): got %v, want record 2 corrupt", err)
	}
	// Compact reads the whole log first, so it refuses to rewrite it.
	if err := s.Compact(ctx, "victim", 3, msg(`"summary"`)); !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("Compact of a corrupt log: got %v, want ErrCorrupt", err)
	}
	if got := seqs(entries(t, s, "victim", 2)); fmt.Sprint(got) != "[3]" {
		t.Fatalf("LoadFrom(2) after the refused Compact: got %v, want [3]", got)
	}
}

func TestK3_BoltCorruptMetaFailsLoadAndLosesNothingElse(t *testing.T) {
	for _, c := range []struct {
		name  string
		value func(stored []byte) []byte // nil result: delete the meta
	}{
		{"FlippedBit", func(v []byte) []byte { v[len(v)-2] ^= 1; return v }},
		{"Missing", func([]byte) []byte { return nil }},
		{"Garbage", func([]byte) []byte { return []byte("meta?") }},
		{"ChecksummedUnknownField", func([]byte) []byte { return frame(`{"created":1,"owner":"x"}`) }},
		{"ChecksummedNoCreationNumber", func([]byte) []byte { return frame(`{}`) }},
		{"ChecksummedCompactedPastTheEnd", func([]byte) []byte { return frame(`{"created":1,"compacted":9}`) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
				b := sessions.Bucket([]byte("victim"))
				v := c.value(bytes.Clone(b.Get([]byte("meta"))))
				var err error
				if v == nil {
					err = b.Delete([]byte("meta"))
				} else {
					err = b.Put([]byte("meta"), v)
				}
				if err != nil {
					t.Fatal(err)
				}
			})
			ctx := t.Context()
			var ce *persistence.CorruptError
			if _, err := s.Sessions(ctx); !errors.As(err, &ce) || ce.SessionID != "victim" || ce.Part != "meta" {
				t.Fatalf("Sessions: got %v, want the victim's meta corrupt", err)
			}
			if _, err := s.Children(ctx, "p-victim"); !errors.As(err, &ce) || ce.SessionID != "victim" {
				t.Fatalf("Children: got %v, want the victim corrupt", err)
			}
			// Deletes the victim and its index entry, found by a scan
			// since the meta does not say where it is, then re-creates it.
			wantCorrupt(t, s, "meta", 0)
			infos, err := s.Children(ctx, "p-victim")
			wantIDs(t, "Children after Delete and Create", infos, err, "victim")
		})
	}
}

// compactedVictim stores a victim log compacted to
// [1 descriptor, 4 descriptor, 5 summary, 6 message], closes the store,
// applies damage to the victim's bucket, and reopens it.
func compactedVictim(t *testing.T, damage func(b *bolt.Bucket) error) persistence.Backend {
	t.Helper()
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	desc := persistence.Record{Kind: "subagent/descriptor", Data: json.RawMessage(`{}`)}
	if _, err := s.CreateWith(t.Context(), hdr("victim"), desc, msg(`2`), msg(`3`), desc, msg(`5`), msg(`6`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(t.Context(), "victim", 5, msg(`"summary"`)); err != nil {
		t.Fatal(err)
	}
	if got := seqs(entries(t, s, "victim", 0)); fmt.Sprint(got) != "[1 4 5 6]" {
		t.Fatalf("compacted log: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reach(t, path, func(sessions *bolt.Bucket) error { return damage(sessions.Bucket([]byte("victim"))) })
	return openBolt(t, path)
}

// TestK3_BoltCompactedLogStillFindsMissingRecords removes records from a
// compacted log, where gaps are legitimate below the summary: Load still
// notices each loss.
func TestK3_BoltCompactedLogStillFindsMissingRecords(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b *bolt.Bucket) error
		part   string
		seq    uint64
	}{
		{"LogOnlyRecordInTheGaps", func(b *bolt.Bucket) error { return b.Delete(seqKey(4)) }, "layout", 0},
		{"Summary", func(b *bolt.Bucket) error { return b.Delete(seqKey(5)) }, "record", 5},
		{"TornTail", func(b *bolt.Bucket) error { return b.Delete(seqKey(6)) }, "record", 6},
		{"MetaForgetsTheCompaction", func(b *bolt.Bucket) error { return b.Put([]byte("meta"), frame(`{"created":1}`)) }, "record", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := compactedVictim(t, c.damage)
			_, _, err := s.Load(t.Context(), "victim")
			var ce *persistence.CorruptError
			if !errors.As(err, &ce) || ce.Part != c.part || ce.Seq != c.seq {
				t.Fatalf("Load: got %v, want part %q seq %d corrupt", err, c.part, c.seq)
			}
		})
	}
	t.Run("Intact", func(t *testing.T) {
		s := compactedVictim(t, func(*bolt.Bucket) error { return nil })
		if got := seqs(entries(t, s, "victim", 0)); fmt.Sprint(got) != "[1 4 5 6]" {
			t.Fatalf("compacted log after reopen: %v", got)
		}
		if got := seqs(entries(t, s, "victim", 2)); fmt.Sprint(got) != "[4 5 6]" {
			t.Fatalf("LoadFrom(2) after reopen: %v", got)
		}
		if seq, err := s.AppendAt(t.Context(), "victim", 6, msg(`7`)); err != nil || seq != 7 {
			t.Fatalf("AppendAt(6) after reopen: got %d, %v", seq, err)
		}
	})
}

// childKey is a "children" index key: uvarint(len(parent)), parent, then
// the creation number, 8 bytes big-endian.
func childKey(parent string, created uint64) []byte {
	k := append(binary.AppendUvarint(nil, uint64(len(parent))), parent...)
	return binary.BigEndian.AppendUint64(k, created)
}

// TestK3_BoltStaleChildIndexEntry plants an index entry for a session
// that does not exist: Children reports it instead of skipping it, and
// Delete of that id clears it.
func TestK3_BoltStaleChildIndexEntry(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "real")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reachTx(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("children")).Put(childKey("p-real", 99), []byte("ghost"))
	})
	s = openBolt(t, path)
	ctx := t.Context()
	var ce *persistence.CorruptError
	if _, err := s.Children(ctx, "p-real"); !errors.As(err, &ce) || ce.SessionID != "ghost" || ce.Part != "layout" {
		t.Fatalf("Children: got %v, want a layout CorruptError naming ghost", err)
	}
	if err := s.Delete(ctx, "ghost"); err != nil {
		t.Fatalf("Delete(ghost): %v", err)
	}
	infos, err := s.Children(ctx, "p-real")
	wantIDs(t, "Children after Delete(ghost)", infos, err, "real")
	if err := s.Delete(ctx, "ghost"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("second Delete(ghost): got %v, want ErrNotFound", err)
	}
}

// TestBoltCompactionAndTasksSurviveReopen checks that the new state is on
// disk: a compaction, creation order, the children index and tasks.
func TestBoltCompactionAndTasksSurviveReopen(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	create(t, s, "z", "a")
	desc := persistence.Record{Kind: "subagent/descriptor", Data: json.RawMessage(`{"version":1}`)}
	if _, err := s.AppendAt(ctx, "z", 0, desc, msg(`2`), msg(`3`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, "z", 3, msg(`"summary"`)); err != nil {
		t.Fatal(err)
	}
	task := persistence.TaskRecord{ID: "t1", ParentSessionID: "z", ChildSessionID: "a", Provider: "spawn",
		State: "completed", Result: json.RawMessage(`{"ok":true}`), UpdatedAt: time.Unix(1700000000, 5).UTC()}
	if err := s.PutTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	// Tasks and sessions are apart: a task named like a session is
	// another thing, and deleting the session keeps it.
	if err := s.PutTask(ctx, persistence.TaskRecord{ID: "a", ParentSessionID: "z", State: "running"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openBolt(t, path)
	ctx = t.Context()
	wantLog(t, s, "z", desc, msg(`"summary"`))
	if got := seqs(entries(t, s, "z", 0)); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("sequence numbers after reopen: %v, want [1 3]", got)
	}
	create(t, s, "b")
	infos, err := s.Sessions(ctx)
	wantIDs(t, "Sessions", infos, err, "z", "b")
	infos, err = s.Children(ctx, "p-z")
	wantIDs(t, "Children(p-z)", infos, err, "z")
	got, err := s.GetTask(ctx, "t1")
	if err != nil || got.State != "completed" || !got.UpdatedAt.Equal(task.UpdatedAt) || string(got.Result) != `{"ok":true}` {
		t.Fatalf("GetTask after reopen: got %+v, %v", got, err)
	}
	tasks, err := s.ListTasks(ctx, "z")
	if err != nil || len(tasks) != 2 || tasks[0].ID != "a" || tasks[1].ID != "t1" {
		t.Fatalf("ListTasks after reopen: got %+v, %v", tasks, err)
	}
}

func TestK3_BoltCorruptTaskFailsReadsAndLosesNothingElse(t *testing.T) {
	for _, c := range []struct {
		name  string
		value []byte
	}{
		{"Garbage", []byte("not a task")},
		{"ChecksummedUnknownField", frame(`{"id":"t1","parentSessionId":"p","state":"x","updatedAt":"2024-01-01T00:00:00Z","admin":true}`)},
		{"ChecksummedOtherTask", frame(`{"id":"t2","parentSessionId":"p","state":"x","updatedAt":"2024-01-01T00:00:00Z"}`)},
		{"ChecksummedNoState", frame(`{"id":"t1","parentSessionId":"p","state":"","updatedAt":"2024-01-01T00:00:00Z"}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := boltPath(t)
			s, err := persistence.OpenBolt(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"t1", "t2"} {
				if err := s.PutTask(t.Context(), persistence.TaskRecord{ID: id, ParentSessionID: "p", State: "running"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			reachTx(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("tasks")).Put([]byte("t1"), c.value) })
			s = openBolt(t, path)
			ctx := t.Context()
			var ce *persistence.CorruptError
			_, err = s.GetTask(ctx, "t1")
			if !errors.As(err, &ce) || ce.Part != "task" || ce.TaskID != "t1" || errors.Is(err, persistence.ErrInvalid) {
				t.Fatalf("GetTask(t1): got %v, want a task CorruptError naming t1", err)
			}
			if _, err := s.ListTasks(ctx, "p"); !errors.As(err, &ce) || ce.TaskID != "t1" {
				t.Fatalf("ListTasks: got %v, want a CorruptError naming t1", err)
			}
			if got, err := s.GetTask(ctx, "t2"); err != nil || got.ID != "t2" {
				t.Fatalf("GetTask(t2): got %+v, %v", got, err)
			}
			if err := s.DeleteTask(ctx, "t1"); err != nil {
				t.Fatalf("DeleteTask(t1): %v", err)
			}
			if tasks, err := s.ListTasks(ctx, "p"); err != nil || len(tasks) != 1 || tasks[0].ID != "t2" {
				t.Fatalf("ListTasks after DeleteTask: got %+v, %v", tasks, err)
			}
		})
	}
}
