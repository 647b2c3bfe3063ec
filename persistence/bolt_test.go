package persistence_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/persistencetest"
	"github.com/subactor/subactor/subagent"
)

// TestBoltConformance runs the shared suite, whose
// D4_CompactKeepsLogOnlyRecords case checks D4 for this store.
func TestBoltConformance(t *testing.T) {
	persistencetest.Run(t, func(t *testing.T) persistence.Store {
		return openBolt(t, boltPath(t))
	})
}

// A deferred session is in the file only once a write stored it, and
// then whole, under the sequence numbers it was created with; one no
// write stored is gone when the store is opened again.
func TestBoltDeferredSessionIsStoredByItsFirstWrite(t *testing.T) {
	path := boltPath(t)
	s := openBolt(t, path)
	d := s.(interface {
		CreateDeferred(context.Context, subagent.SessionHeader, ...persistence.Record) (uint64, error)
	})
	h := subagent.SessionHeader{SessionID: "kept", ParentSessionID: "p", DelegationDepth: 1}
	for _, id := range []string{"kept", "lost"} {
		h.SessionID = id
		if _, err := d.CreateDeferred(t.Context(), h, persistence.Record{Kind: "message", Data: []byte(`"prompt"`)}); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := s.AppendAt(t.Context(), "kept", 1, persistence.Record{Kind: "message", Data: []byte(`"answer"`)}); err != nil || seq != 2 {
		t.Fatalf("AppendAt: %d, %v", seq, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBolt(t, path)
	_, entries, err := s.LoadFrom(t.Context(), "kept", 0)
	if err != nil || len(entries) != 2 || string(entries[0].Data) != `"prompt"` || entries[1].Seq != 2 {
		t.Fatalf("kept: %+v, %v", entries, err)
	}
	if kids, err := s.Children(t.Context(), "p"); err != nil || len(kids) != 1 || kids[0].Header.SessionID != "kept" {
		t.Fatalf("children of p: %+v, %v", kids, err)
	}
	if _, _, err := s.Load(t.Context(), "lost"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("lost: %v, want ErrNotFound", err)
	}
}

func TestBoltTaskConformance(t *testing.T) {
	persistencetest.RunTasks(t, func(t *testing.T) persistence.TaskStore {
		return openBolt(t, boltPath(t))
	})
}

func boltPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "sessions.db")
}

// openBolt opens path and closes it when the test ends, unless the test
// closed it first.
func openBolt(t *testing.T, path string) persistence.Backend {
	t.Helper()
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func hdr(id string) subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: id, ParentSessionID: "p-" + id, DelegationDepth: 1}
}

func msg(data string) persistence.Record {
	return persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(data)}
}

func create(t *testing.T, s persistence.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.Create(t.Context(), hdr(id)); err != nil {
			t.Fatalf("Create(%q): %v", id, err)
		}
	}
}

func appendRecs(t *testing.T, s persistence.Store, id string, recs ...persistence.Record) {
	t.Helper()
	if err := s.Append(t.Context(), id, recs...); err != nil {
		t.Fatalf("Append(%q): %v", id, err)
	}
}

// wantLog loads id and compares it with hdr(id) and recs byte for byte:
// Bolt stores data verbatim.
func wantLog(t *testing.T, s persistence.Store, id string, recs ...persistence.Record) {
	t.Helper()
	h, got, err := s.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	if h != hdr(id) {
		t.Fatalf("Load(%q) header: got %+v, want %+v", id, h, hdr(id))
	}
	if len(got) != len(recs) {
		t.Fatalf("Load(%q): got %d records, want %d", id, len(got), len(recs))
	}
	for i := range recs {
		if got[i].Kind != recs[i].Kind || !bytes.Equal(got[i].Data, recs[i].Data) {
			t.Fatalf("Load(%q) record %d: got %s %s, want %s %s", id, i, got[i].Kind, got[i].Data, recs[i].Kind, recs[i].Data)
		}
	}
}

func TestBoltDurableAcrossReopen(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "a", "b", "gone")
	appendRecs(t, s, "a", msg(`{"n":1}`), msg(`{"n":2}`))
	appendRecs(t, s, "b", msg(`"b1"`))
	// Data is kept verbatim, whitespace and escapes included.
	appendRecs(t, s, "a", persistence.Record{Kind: "descriptor", Data: json.RawMessage(` {"x": "<é>"} `)})
	if err := s.Delete(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openBolt(t, path)
	wantA := []persistence.Record{msg(`{"n":1}`), msg(`{"n":2}`), {Kind: "descriptor", Data: json.RawMessage(` {"x": "<é>"} `)}}
	wantLog(t, s, "a", wantA...)
	wantLog(t, s, "b", msg(`"b1"`))
	if _, _, err := s.Load(t.Context(), "gone"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("deleted session after reopen: got %v, want ErrNotFound", err)
	}
	// Appending after a reopen continues the same order.
	appendRecs(t, s, "a", msg(`{"n":4}`))
	wantLog(t, s, "a", append(wantA, msg(`{"n":4}`))...)
}

// reach opens the closed store file with bbolt itself and runs fn on the
// sessions bucket in one write transaction: the way a damaged disk, a bad
// copy or another program would change it.
func reach(t *testing.T, path string, fn func(sessions *bolt.Bucket) error) {
	t.Helper()
	reachTx(t, path, func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("sessions"))) })
}

// reachTx is reach with the whole transaction.
func reachTx(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatalf("bbolt Close: %v", err)
		}
	}()
	if err := db.Update(fn); err != nil {
		t.Fatalf("changing the file: %v", err)
	}
}

// frame builds a stored value with a valid checksum around body, as Bolt
// frames it (format byte 1, CRC-32C big-endian, body), so that tests can
// store values that pass the checksum and must still be refused.
func frame(body string) []byte {
	v := []byte{1, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(v[1:], crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
	return append(v, body...)
}

// recordBody is a record's framed body: uvarint(len(kind)), kind, data.
func recordBody(kind, data string) string {
	return string(binary.AppendUvarint(nil, uint64(len(kind)))) + kind + data
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// damaged fills a store with a "victim" session of three records and a
// "bystander" of one, closes it, applies damage to the victim's bucket (or
// to the sessions bucket when the victim is not a bucket), and reopens it.
func damaged(t *testing.T, damage func(t *testing.T, sessions *bolt.Bucket)) persistence.Backend {
	t.Helper()
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "victim", "bystander")
	appendRecs(t, s, "victim", msg(`1`), msg(`2`))
	appendRecs(t, s, "bystander", msg(`"b"`))
	appendRecs(t, s, "victim", msg(`3`))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reach(t, path, func(sessions *bolt.Bucket) error {
		damage(t, sessions)
		return nil
	})
	return openBolt(t, path)
}

// wantCorrupt checks that Load of the victim fails with a *CorruptError
// naming part and seq, and that nothing else is lost: the bystander loads
// and takes appends, the victim still takes appends (they are kept, and
// Load keeps failing), and Delete clears the victim for a fresh Create.
func wantCorrupt(t *testing.T, s persistence.Backend, part string, seq uint64) {
	t.Helper()
	_, recs, err := s.Load(t.Context(), "victim")
	if !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("Load(victim): got %v (%d records), want ErrCorrupt", err, len(recs))
	}
	if errors.Is(err, persistence.ErrInvalid) || errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Load(victim): %v also matches ErrInvalid or ErrNotFound", err)
	}
	var ce *persistence.CorruptError
	if !errors.As(err, &ce) || ce.SessionID != "victim" || ce.Part != part || ce.Seq != seq {
		t.Fatalf("Load(victim): got %#v, want a CorruptError for victim, part %q, seq %d", err, part, seq)
	}
	if recs != nil {
		t.Fatalf("Load(victim) returned records with its error: %v", recs)
	}
	t.Logf("Load(victim): %v", err)

	wantLog(t, s, "bystander", msg(`"b"`))
	appendRecs(t, s, "bystander", msg(`"b2"`))
	wantLog(t, s, "bystander", msg(`"b"`), msg(`"b2"`))
	create(t, s, "newcomer")
	appendRecs(t, s, "newcomer", msg(`"n"`))
	wantLog(t, s, "newcomer", msg(`"n"`))

	if part != "layout" {
		if err := s.Append(t.Context(), "victim", msg(`4`)); err != nil {
			t.Fatalf("Append(victim) with a corrupt %s: %v", part, err)
		}
		if _, _, err := s.Load(t.Context(), "victim"); !errors.Is(err, persistence.ErrCorrupt) {
			t.Fatalf("Load(victim) after Append: got %v, want ErrCorrupt", err)
		}
	}
	if err := s.Delete(t.Context(), "victim"); err != nil {
		t.Fatalf("Delete(victim): %v", err)
	}
	create(t, s, "victim")
	appendRecs(t, s, "victim", msg(`"fresh"`))
	wantLog(t, s, "victim", msg(`"fresh"`))
}

func TestK3_BoltCorruptRecordFailsLoadAndLosesNothingElse(t *testing.T) {
	for _, c := range []struct {
		name  string
		value func(stored []byte) []byte
	}{
		{"FlippedBit", func(v []byte) []byte { v[len(v)-1] ^= 1; return v }},
		{"Truncated", func(v []byte) []byte { return v[:3] }},
		{"Empty", func([]byte) []byte { return []byte{} }},
		{"Garbage", func([]byte) []byte { return []byte("not a record at all") }},
		{"UnknownFormat", func(v []byte) []byte { v[0] = 9; return v }},
		{"ChecksummedBadJSON", func([]byte) []byte { return frame(recordBody("message", `{"torn":`)) }},
		{"ChecksummedNoKind", func([]byte) []byte { return frame(recordBody("", `2`)) }},
		{"ChecksummedKindPastEnd", func([]byte) []byte { return frame(string(binary.AppendUvarint(nil, 99)) + "message") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
				b := sessions.Bucket([]byte("victim"))
				v := bytes.Clone(b.Get(seqKey(2)))
				if v == nil {
					t.Fatal("record 2 is not stored under key 2")
				}
				if err := b.Put(seqKey(2), c.value(v)); err != nil {
					t.Fatal(err)
				}
			})
			wantCorrupt(t, s, "record", 2)
		})
	}
}

func TestK3_BoltMissingRecordFailsLoad(t *testing.T) {
	for _, c := range []struct {
		name string
		seq  uint64
	}{
		{"Middle", 2},
		{"TornTail", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
				if err := sessions.Bucket([]byte("victim")).Delete(seqKey(c.seq)); err != nil {
					t.Fatal(err)
				}
			})
			wantCorrupt(t, s, "record", c.seq)
		})
	}
}

func TestK3_BoltCorruptHeaderFailsLoadAndLosesNothingElse(t *testing.T) {
	for _, c := range []struct {
		name  string
		value func(stored []byte) []byte // nil result: delete the header
	}{
		{"FlippedBit", func(v []byte) []byte { v[len(v)-2] ^= 0x20; return v }},
		{"Truncated", func(v []byte) []byte { return v[:len(v)-1] }},
		{"Garbage", func([]byte) []byte { return []byte{0xff, 0, 1} }},
		{"Missing", func([]byte) []byte { return nil }},
		{"ChecksummedNotJSON", func([]byte) []byte { return frame(`{"sessionId":`) }},
		{"ChecksummedUnknownField", func([]byte) []byte { return frame(`{"sessionId":"victim","delegationDepth":1,"admin":true}`) }},
		{"ChecksummedTrailingData", func([]byte) []byte { return frame(`{"sessionId":"victim","delegationDepth":1} {}`) }},
		{"ChecksummedOtherSession", func([]byte) []byte { return frame(`{"sessionId":"bystander","delegationDepth":1}`) }},
		{"ChecksummedNegativeDepth", func([]byte) []byte { return frame(`{"sessionId":"victim","delegationDepth":-1}`) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
				b := sessions.Bucket([]byte("victim"))
				v := c.value(bytes.Clone(b.Get([]byte("header"))))
				var err error
				if v == nil {
					err = b.Delete([]byte("header"))
				} else {
					err = b.Put([]byte("header"), v)
				}
				if err != nil {
					t.Fatal(err)
				}
			})
			wantCorrupt(t, s, "header", 0)
		})
	}
}

func TestK3_BoltUnexpectedLayoutFailsLoad(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(sessions *bolt.Bucket) error
	}{
		{"StrayKey", func(s *bolt.Bucket) error { return s.Bucket([]byte("victim")).Put([]byte("stray"), frame("x")) }},
		{"NestedBucket", func(s *bolt.Bucket) error {
			_, err := s.Bucket([]byte("victim")).CreateBucket([]byte("nested"))
			return err
		}},
		{"RecordPastSequence", func(s *bolt.Bucket) error {
			return s.Bucket([]byte("victim")).Put(seqKey(4), frame(recordBody("message", `4`)))
		}},
		{"SessionIsNotABucket", func(s *bolt.Bucket) error {
			if err := s.DeleteBucket([]byte("victim")); err != nil {
				return err
			}
			return s.Put([]byte("victim"), []byte("not a bucket"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := damaged(t, func(t *testing.T, sessions *bolt.Bucket) {
				if err := c.damage(sessions); err != nil {
					t.Fatal(err)
				}
			})
			if c.name == "SessionIsNotABucket" {
				if err := s.Create(t.Context(), hdr("victim")); !errors.Is(err, persistence.ErrCorrupt) {
					t.Fatalf("Create over a stray value: got %v, want ErrCorrupt", err)
				}
				if err := s.Append(t.Context(), "victim", msg(`4`)); !errors.Is(err, persistence.ErrCorrupt) {
					t.Fatalf("Append to a stray value: got %v, want ErrCorrupt", err)
				}
			}
			wantCorrupt(t, s, "layout", 0)
		})
	}
}

// TestK3_BoltAppendNeverOverwrites winds a session's sequence back, as a
// damaged bucket header would, and checks that Append refuses to write
// over the record already stored under the next number.
func TestK3_BoltAppendNeverOverwrites(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "victim")
	appendRecs(t, s, "victim", msg(`1`), msg(`2`), msg(`3`))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var before []byte
	reach(t, path, func(sessions *bolt.Bucket) error {
		b := sessions.Bucket([]byte("victim"))
		before = bytes.Clone(b.Get(seqKey(2)))
		return b.SetSequence(1)
	})

	s = openBolt(t, path)
	if err := s.Append(t.Context(), "victim", msg(`"overwrite?"`)); !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("Append: got %v, want ErrCorrupt", err)
	}
	if _, _, err := s.Load(t.Context(), "victim"); !errors.Is(err, persistence.ErrCorrupt) {
		t.Fatalf("Load: got %v, want ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reach(t, path, func(sessions *bolt.Bucket) error {
		if after := sessions.Bucket([]byte("victim")).Get(seqKey(2)); !bytes.Equal(after, before) {
			t.Fatalf("record 2 changed: %q, was %q", after, before)
		}
		return nil
	})
}

// TestK3_BoltDamagedPagesNeverYieldAWrongLog overwrites random bytes of a
// store file below the value level, in bbolt's own pages past the two meta
// pages, and checks that no damage crashes OpenBolt, Load, CheckBolt or
// RepairBolt, and that none returns a log that differs from the one
// stored: OpenBolt opens the file or refuses it (ErrCorrupt, or not a
// database); Load returns the log, ErrCorrupt, or, when the damage hit the
// session's id itself, ErrNotFound; and after RepairBolt every session is
// as stored or gone.
func TestK3_BoltDamagedPagesNeverYieldAWrongLog(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	const sessions, records = 20, 10
	want := make([][]persistence.Record, sessions)
	for i := range sessions {
		id := fmt.Sprint("s", i)
		create(t, s, id)
		for j := range records {
			r := msg(fmt.Sprintf(`{"turn":%d,"text":"%0150d"}`, j, i))
			appendRecs(t, s, id, r)
			want[i] = append(want[i], r)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var used int64
	reach(t, path, func(sessions *bolt.Bucket) error {
		used = sessions.Tx().Size()
		return nil
	})
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := int64(2 * os.Getpagesize())

	outcomes := map[string]int{}
	for trial := range 100 {
		r := rand.New(rand.NewPCG(uint64(trial), 0))
		file := bytes.Clone(pristine)
		for range 1 + r.IntN(8) {
			file[meta+r.Int64N(used-meta)] = byte(r.Uint32())
		}
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		repaired(t, trial, path, want)
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := persistence.OpenBolt(path)
		switch {
		case errors.Is(err, persistence.ErrCorrupt):
			outcomes["corrupt"]++
			outcomes["open refused"]++
			continue
		case err != nil && strings.Contains(err.Error(), "not a bbolt database"):
			outcomes["not a database"]++
			continue
		case err != nil:
			t.Fatalf("trial %d: OpenBolt: unexpected error %v", trial, err)
		}
		for i := range sessions {
			id := fmt.Sprint("s", i)
			h, got, err := s.Load(t.Context(), id)
			switch {
			case errors.Is(err, persistence.ErrCorrupt):
				outcomes["corrupt"]++
				if strings.Contains(err.Error(), "bbolt:") {
					// bbolt panicked or faulted on the page; Load recovered.
					outcomes["corrupt, recovered panic"]++
				}
			case errors.Is(err, persistence.ErrNotFound):
				outcomes["not found"]++
			case err != nil:
				t.Fatalf("trial %d: Load(%s): unexpected error %v", trial, id, err)
			default:
				if h != hdr(id) || !sameRecords(got, want[i]) {
					t.Fatalf("trial %d: Load(%s) returned a changed log without an error", trial, id)
				}
				outcomes["intact"]++
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("trial %d: Close: %v", trial, err)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["corrupt"] == 0 {
		t.Fatal("no damage was detected: the test damaged nothing that matters")
	}
}

// repaired runs RepairBolt on the damaged file at path, whose sessions
// s0, s1, ... held want, and checks that every session it kept is as
// stored. A file RepairBolt cannot open at all is left as it was.
func repaired(t *testing.T, trial int, path string, want [][]persistence.Record) {
	t.Helper()
	_, _, err := persistence.RepairBolt(t.Context(), path)
	switch {
	case err != nil && strings.Contains(err.Error(), "persistence: repair"):
		t.Fatalf("trial %d: RepairBolt: %v", trial, err)
	case err != nil:
		return // it could not open the file: checked below for OpenBolt
	}
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatalf("trial %d: OpenBolt after RepairBolt: %v", trial, err)
	}
	defer s.Close()
	for i := range want {
		id := fmt.Sprint("s", i)
		h, got, err := s.Load(t.Context(), id)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
		case err != nil:
			t.Fatalf("trial %d: Load(%s) after RepairBolt: %v", trial, id, err)
		case h != hdr(id) || !sameRecords(got, want[i]):
			t.Fatalf("trial %d: RepairBolt kept a changed log of %s", trial, id)
		}
	}
}

func sameRecords(a, b []persistence.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// TestBoltConcurrentAppenders runs writers on several sessions at once,
// with appends to a missing session failing inside the same group commits
// and readers loading meanwhile; with -race. Every writer's records land
// once each, in its order, and every Load sees a prefix of that order.
func TestBoltConcurrentAppenders(t *testing.T) {
	s := openBolt(t, boltPath(t))
	const sessions, writers, rounds = 4, 4, 25
	for i := range sessions {
		create(t, s, fmt.Sprint("s", i))
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, sessions*writers*rounds*2)
	for i := range sessions {
		id := fmt.Sprint("s", i)
		for w := range writers {
			wg.Go(func() {
				n := 0
				for r := range rounds {
					// One to three records per call, all or none.
					recs := make([]persistence.Record, 1+r%3)
					for j := range recs {
						recs[j] = persistence.Record{Kind: fmt.Sprint("w", w), Data: json.RawMessage(fmt.Sprint(n))}
						n++
					}
					if err := s.Append(ctx, id, recs...); err != nil {
						errs <- fmt.Errorf("Append(%s, w%d): %w", id, w, err)
					}
				}
			})
		}
		wg.Go(func() {
			for range rounds {
				_, recs, err := s.Load(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				if err := inWriterOrder(recs); err != nil {
					errs <- fmt.Errorf("Load(%s) mid-way: %w", id, err)
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			if err := s.Append(ctx, "missing", msg(`0`)); !errors.Is(err, persistence.ErrNotFound) {
				errs <- fmt.Errorf("Append(missing): got %v, want ErrNotFound", err)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	perWriter := 0
	for r := range rounds {
		perWriter += 1 + r%3
	}
	for i := range sessions {
		id := fmt.Sprint("s", i)
		_, recs, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != writers*perWriter {
			t.Fatalf("%s: got %d records, want %d", id, len(recs), writers*perWriter)
		}
		if err := inWriterOrder(recs); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// inWriterOrder checks that each writer's records (Kind names the writer,
// Data counts from 0) appear once each and in order.
func inWriterOrder(recs []persistence.Record) error {
	next := map[string]int{}
	for _, r := range recs {
		var n int
		if err := json.Unmarshal(r.Data, &n); err != nil || n != next[r.Kind] {
			return fmt.Errorf("writer %s: got record %s, want %d", r.Kind, r.Data, next[r.Kind])
		}
		next[r.Kind]++
	}
	return nil
}

func TestBoltOpenErrors(t *testing.T) {
	t.Run("Directory", func(t *testing.T) {
		dir := t.TempDir()
		_, err := persistence.OpenBolt(dir)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("OpenBolt(directory): got %v, want an error naming the path", err)
		}
		t.Log(err)
	})
	t.Run("MissingDirectory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no", "such", "dir", "sessions.db")
		if _, err := persistence.OpenBolt(path); err == nil {
			t.Fatal("OpenBolt in a missing directory: no error")
		}
	})
	for _, c := range []struct{ name, content string }{
		{"ShortGarbage", "hello, not a database"},
		{"PagesOfGarbage", strings.Repeat("garbage!", 4096)},
		{"ZeroedPages", string(make([]byte, 16384))},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessions.db")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := persistence.OpenBolt(path)
			if err == nil || !strings.Contains(err.Error(), "not a bbolt database") {
				t.Fatalf("OpenBolt(garbage): got %v, want a not-a-database error", err)
			}
			t.Log(err)
			// A file that is not ours is left as it was.
			if got, _ := os.ReadFile(path); string(got) != c.content {
				t.Fatal("a failed OpenBolt changed the file")
			}
		})
	}
	t.Run("HeldByAnotherStore", func(t *testing.T) {
		path := boltPath(t)
		s := openBolt(t, path)
		create(t, s, "a")
		second, err := persistence.OpenBolt(path)
		if err == nil {
			_ = second.Close()
			t.Fatal("a second OpenBolt of a held file succeeded")
		}
		if !errors.Is(err, berrors.ErrTimeout) || !strings.Contains(err.Error(), "locked") {
			t.Fatalf("second OpenBolt: got %v, want a locked-file error", err)
		}
		// The holder is unaffected.
		wantLog(t, s, "a")
	})
}

func TestBoltRejectsOverlongSessionID(t *testing.T) {
	s := openBolt(t, boltPath(t))
	long := strings.Repeat("x", bolt.MaxKeySize+1)
	if err := s.Create(t.Context(), subagent.SessionHeader{SessionID: long}); !errors.Is(err, persistence.ErrInvalid) {
		t.Fatalf("Create: got %v, want ErrInvalid", err)
	}
}

func TestBoltCallsAfterClose(t *testing.T) {
	s, err := persistence.OpenBolt(boltPath(t))
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "a")
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	ctx := t.Context()
	_, _, loadErr := s.Load(ctx, "a")
	errs := map[string]error{
		"Create":       s.Create(ctx, hdr("b")),
		"Append":       s.Append(ctx, "a", msg(`1`)),
		"Append(none)": s.Append(ctx, "a"),
		"Load":         loadErr,
		"Delete":       s.Delete(ctx, "a"),
	}
	for name, err := range newCalls(s, "a") {
		errs[name] = err
	}
	for name, err := range errs {
		if !errors.Is(err, persistence.ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
}

// TestBoltCloseDuringAppends closes the store while appenders run: each
// Append either lands or fails with ErrClosed, and after a reopen the log
// holds exactly the ones that landed, in order.
func TestBoltCloseDuringAppends(t *testing.T) {
	path := boltPath(t)
	s, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "a")
	const writers = 4
	landed := make([]int, writers)
	started := make(chan struct{}, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			sent := false
			defer func() {
				if !sent {
					started <- struct{}{}
				}
			}()
			for n := 0; ; n++ {
				err := s.Append(context.Background(), "a", persistence.Record{Kind: fmt.Sprint("w", w), Data: json.RawMessage(fmt.Sprint(n))})
				if errors.Is(err, persistence.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				landed[w]++
				if !sent {
					sent = true
					started <- struct{}{}
				}
			}
		})
	}
	for range writers {
		testkit.Recv(t, started, "each writer's first Append")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	s = openBolt(t, path)
	_, recs, err := s.Load(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := inWriterOrder(recs); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range landed {
		total += n
	}
	if len(recs) != total {
		t.Fatalf("got %d records after reopen, want the %d that landed", len(recs), total)
	}
}

func BenchmarkBoltAppend(b *testing.B) {
	rec := msg(`{"role":"assistant","content":[{"type":"text","text":"` + strings.Repeat("x", 400) + `"}]}`)
	setup := func(b *testing.B) persistence.Backend {
		s, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		if err := s.Create(b.Context(), hdr("s")); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("Serial", func(b *testing.B) {
		s := setup(b)
		for b.Loop() {
			if err := s.Append(b.Context(), "s", rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		s := setup(b)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Append(context.Background(), "s", rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
