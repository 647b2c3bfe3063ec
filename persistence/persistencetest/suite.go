package persistencetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Run runs every session-log conformance case against a fresh store from
// newStore, and the deferred-create cases when its stores have
// CreateDeferred (deferredCreator); RunTasks does the same for TaskStore.
func Run(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	runCases(t, newStore, []testCase[persistence.Store]{
		{"CreateThenLoad", testCreateThenLoad},
		{"CreateDuplicate", testCreateDuplicate},
		{"CreateInvalid", testCreateInvalid},
		{"UnknownSession", testUnknownSession},
		{"AppendKeepsOrder", testAppendKeepsOrder},
		{"AppendKeepsOrderPast256", testAppendKeepsOrderPast256},
		{"AppendInvalidIsAtomic", testAppendInvalidIsAtomic},
		{"SessionsAreIsolated", testSessionsAreIsolated},
		{"CopiesOnTheWayIn", testCopiesOnTheWayIn},
		{"CopiesOnTheWayOut", testCopiesOnTheWayOut},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Delete", testDelete},
		{"EndedContext", testEndedContext},
		{"CreateWithThenLoad", testCreateWithThenLoad},
		{"CreateWithIsAtomic", testCreateWithIsAtomic},
		{"AppendAtFencesALateWriter", testAppendAtFencesALateWriter},
		{"AppendAtRefusesBadInputFirst", testAppendAtRefusesBadInputFirst},
		{"AppendAtConcurrentOneWinnerPerSeq", testAppendAtConcurrentOneWinnerPerSeq},
		{"LoadFromReturnsSequenceNumbers", testLoadFromReturnsSequenceNumbers},
		{"Header", testHeader},
		{"SessionsInCreationOrder", testSessionsInCreationOrder},
		{"ChildrenByParent", testChildrenByParent},
		{"D4_CompactKeepsLogOnlyRecords", testCompactKeepsLogOnlyRecords},
		{"CompactAtTheLogsEndAndAgain", testCompactAtTheLogsEndAndAgain},
		{"CompactInvalidChangesNothing", testCompactInvalidChangesNothing},
		{"EndedContextNewCalls", testEndedContextNewCalls},
	})
	if _, ok := newStore(t).(deferredCreator); ok {
		runCases(t, func(t *testing.T) deferredCreator { return newStore(t).(deferredCreator) }, deferredCases)
	}
}

type testCase[S any] struct {
	name string
	f    func(*testing.T, S)
}

// runCases runs each case as a subtest against a fresh store.
func runCases[S any](t *testing.T, newStore func(*testing.T) S, cases []testCase[S]) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, newStore(t)) })
	}
}

// wantErr checks that err is or wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

func header(id string) subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: id, ParentSessionID: "parent-of-" + id, DelegationDepth: 2}
}

func rec(kind, data string) persistence.Record {
	return persistence.Record{Kind: kind, Data: json.RawMessage(data)}
}

func mustCreate(t *testing.T, s persistence.Store, h subagent.SessionHeader) {
	t.Helper()
	if err := s.Create(t.Context(), h); err != nil {
		t.Fatalf("Create(%q): %v", h.SessionID, err)
	}
}

func mustAppend(t *testing.T, s persistence.Store, id string, recs ...persistence.Record) {
	t.Helper()
	if err := s.Append(t.Context(), id, recs...); err != nil {
		t.Fatalf("Append(%q): %v", id, err)
	}
}

func mustLoad(t *testing.T, s persistence.Store, id string) (subagent.SessionHeader, []persistence.Record) {
	t.Helper()
	h, recs, err := s.Load(t.Context(), id)
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	return h, recs
}

// wantRecords compares by kind and compact JSON, so a store may re-encode
// data as long as it keeps its meaning byte for byte after compaction.
func wantRecords(t *testing.T, got []persistence.Record, want ...persistence.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records %s, want %d %s", len(got), show(got), len(want), show(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || compact(t, got[i].Data) != compact(t, want[i].Data) {
			t.Fatalf("record %d: got %s, want %s", i, show(got), show(want))
		}
	}
}

func compact(t *testing.T, data json.RawMessage) string {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatalf("stored data is not JSON: %v", err)
	}
	return string(b)
}

func show(recs []persistence.Record) string {
	b, _ := json.Marshal(recs)
	return string(b)
}

func testCreateThenLoad(t *testing.T, s persistence.Store) {
	h := header("s1")
	mustCreate(t, s, h)
	got, recs := mustLoad(t, s, "s1")
	if got != h {
		t.Fatalf("header: got %+v, want %+v", got, h)
	}
	if len(recs) != 0 {
		t.Fatalf("new session has records: %s", show(recs))
	}
}

func testCreateDuplicate(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `1`))
	other := subagent.SessionHeader{SessionID: "s1", DelegationDepth: 5}
	wantErr(t, "duplicate Create", s.Create(t.Context(), other), persistence.ErrExists)
	h, recs := mustLoad(t, s, "s1")
	if h != header("s1") {
		t.Fatalf("duplicate Create replaced the header: %+v", h)
	}
	wantRecords(t, recs, rec("message", `1`))
}

func testCreateInvalid(t *testing.T, s persistence.Store) {
	for _, h := range []subagent.SessionHeader{
		{SessionID: ""},
		{SessionID: "neg", DelegationDepth: -1},
	} {
		wantErr(t, fmt.Sprintf("Create(%+v)", h), s.Create(t.Context(), h), persistence.ErrInvalid)
	}
	_, _, err := s.Load(t.Context(), "neg")
	wantErr(t, "Load of an invalid header", err, persistence.ErrNotFound)
}

func testUnknownSession(t *testing.T, s persistence.Store) {
	wantErr(t, "Append", s.Append(t.Context(), "nope", rec("message", `1`)), persistence.ErrNotFound)
	wantErr(t, "Append of no records", s.Append(t.Context(), "nope"), persistence.ErrNotFound)
	wantErr(t, "Delete", s.Delete(t.Context(), "nope"), persistence.ErrNotFound)
	_, _, err := s.Load(t.Context(), "nope")
	wantErr(t, "Load", err, persistence.ErrNotFound)
}

func testAppendKeepsOrder(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `{"n":1}`), rec("descriptor", `{"n":2}`))
	mustAppend(t, s, "s1")
	mustAppend(t, s, "s1", rec("message", `{"n":3}`))
	_, recs := mustLoad(t, s, "s1")
	wantRecords(t, recs, rec("message", `{"n":1}`), rec("descriptor", `{"n":2}`), rec("message", `{"n":3}`))
}

// testAppendKeepsOrderPast256 appends more records than one byte can
// count, in calls of different sizes, so that a store ordering records by
// an encoded counter (a little-endian key, say) shows it.
func testAppendKeepsOrderPast256(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	var want []persistence.Record
	for _, n := range []int{1, 255, 1, 300} {
		batch := make([]persistence.Record, n)
		for i := range batch {
			batch[i] = rec("message", fmt.Sprint(len(want)+i))
		}
		mustAppend(t, s, "s1", batch...)
		want = append(want, batch...)
	}
	_, recs := mustLoad(t, s, "s1")
	wantRecords(t, recs, want...)
}

func testAppendInvalidIsAtomic(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `1`))
	for _, bad := range []persistence.Record{
		rec("", `2`),
		rec("message", `{"torn":`),
		{Kind: "message"},
	} {
		wantErr(t, fmt.Sprintf("Append(%+v)", bad), s.Append(t.Context(), "s1", rec("message", `2`), bad), persistence.ErrInvalid)
	}
	_, recs := mustLoad(t, s, "s1")
	wantRecords(t, recs, rec("message", `1`))
}

func testSessionsAreIsolated(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("a"))
	mustCreate(t, s, header("b"))
	mustAppend(t, s, "a", rec("message", `"a"`))
	mustAppend(t, s, "b", rec("message", `"b"`))
	_, ra := mustLoad(t, s, "a")
	hb, rb := mustLoad(t, s, "b")
	wantRecords(t, ra, rec("message", `"a"`))
	wantRecords(t, rb, rec("message", `"b"`))
	if hb != header("b") {
		t.Fatalf("header b: got %+v", hb)
	}
}

func testCopiesOnTheWayIn(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	data := []byte(`{"x":1}`)
	recs := []persistence.Record{{Kind: "message", Data: data}}
	mustAppend(t, s, "s1", recs...)
	copy(data, `{"x":2}`)
	recs[0].Kind = "changed"
	_, got := mustLoad(t, s, "s1")
	wantRecords(t, got, rec("message", `{"x":1}`))
}

func testCopiesOnTheWayOut(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `{"x":1}`))
	_, got := mustLoad(t, s, "s1")
	copy(got[0].Data, `{"x":2}`)
	got[0].Kind = "changed"
	_, again := mustLoad(t, s, "s1")
	wantRecords(t, again, rec("message", `{"x":1}`))
}

// testConcurrentAppends checks that concurrent appends all land and that
// each writer's records keep their order. Run it with -race.
func testConcurrentAppends(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- s.Append(context.Background(), "s1", rec(fmt.Sprint(w), fmt.Sprint(i)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	_, recs := mustLoad(t, s, "s1")
	if len(recs) != writers*each {
		t.Fatalf("got %d records, want %d", len(recs), writers*each)
	}
	next := map[string]int{}
	for _, r := range recs {
		var i int
		if err := json.Unmarshal(r.Data, &i); err != nil || i != next[r.Kind] {
			t.Fatalf("writer %s: got record %s, want %d", r.Kind, r.Data, next[r.Kind])
		}
		next[r.Kind]++
	}
}

// testDelete checks that Delete removes one log entirely, header and
// records, touches no other, and frees the id for a fresh Create.
func testDelete(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("gone"))
	mustAppend(t, s, "gone", rec("message", `1`))
	mustCreate(t, s, header("kept"))
	mustAppend(t, s, "kept", rec("message", `"k"`))
	if err := s.Delete(t.Context(), "gone"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, err := s.Load(t.Context(), "gone")
	wantErr(t, "Load after Delete", err, persistence.ErrNotFound)
	wantErr(t, "Append after Delete", s.Append(t.Context(), "gone", rec("message", `2`)), persistence.ErrNotFound)
	wantErr(t, "second Delete", s.Delete(t.Context(), "gone"), persistence.ErrNotFound)
	h, recs := mustLoad(t, s, "kept")
	if h != header("kept") {
		t.Fatalf("Delete changed another header: %+v", h)
	}
	wantRecords(t, recs, rec("message", `"k"`))
	// The id is free again, and the new log starts empty.
	fresh := subagent.SessionHeader{SessionID: "gone", DelegationDepth: 1}
	mustCreate(t, s, fresh)
	h, recs = mustLoad(t, s, "gone")
	if h != fresh {
		t.Fatalf("re-created header: got %+v, want %+v", h, fresh)
	}
	wantRecords(t, recs)
}

func testEndedContext(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantErr(t, "Create", s.Create(ctx, header("s2")), context.Canceled)
	wantErr(t, "Append", s.Append(ctx, "s1", rec("message", `1`)), context.Canceled)
	_, _, err := s.Load(ctx, "s1")
	wantErr(t, "Load", err, context.Canceled)
	wantErr(t, "Delete", s.Delete(ctx, "s1"), context.Canceled)
	_, _, err = s.Load(t.Context(), "s2")
	wantErr(t, "Load of the session Create got with an ended context", err, persistence.ErrNotFound)
	_, recs := mustLoad(t, s, "s1")
	wantRecords(t, recs)
}
