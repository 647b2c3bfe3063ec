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

// entry is a record with the sequence number a case expects it under.
func entry(seq uint64, kind, data string) persistence.Entry {
	return persistence.Entry{Seq: seq, Record: rec(kind, data)}
}

func mustLoadFrom(t *testing.T, s persistence.Store, id string, after uint64) []persistence.Entry {
	t.Helper()
	_, entries, err := s.LoadFrom(t.Context(), id, after)
	if err != nil {
		t.Fatalf("LoadFrom(%q, %d): %v", id, after, err)
	}
	return entries
}

// wantEntries compares sequence numbers, kinds and compact JSON.
func wantEntries(t *testing.T, got []persistence.Entry, want ...persistence.Entry) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Seq == want[i].Seq && got[i].Kind == want[i].Kind && compact(t, got[i].Data) == compact(t, want[i].Data)
	}
	if !ok {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("got entries %s, want %s", g, w)
	}
}

// wantConflict checks that err is a *ConflictError for id with the given
// expected and actual ends.
func wantConflict(t *testing.T, err error, id string, expected, actual uint64) {
	t.Helper()
	var ce *persistence.ConflictError
	if !errors.Is(err, persistence.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *ConflictError (ErrConflict)", err)
	}
	if ce.SessionID != id || ce.Expected != expected || ce.Actual != actual {
		t.Fatalf("got %+v, want session %q, expected %d, actual %d", *ce, id, expected, actual)
	}
}

// mustAppendAt appends recs to id at the end expect and checks the new
// end.
func mustAppendAt(t *testing.T, s persistence.Store, id string, expect, want uint64, recs ...persistence.Record) {
	t.Helper()
	if seq, err := s.AppendAt(t.Context(), id, expect, recs...); err != nil || seq != want {
		t.Fatalf("AppendAt(%q, %d): got %d, %v; want %d, nil", id, expect, seq, err, want)
	}
}

func testCreateWithThenLoad(t *testing.T, s persistence.Store) {
	data := []byte(`{"n":1}`)
	seq, err := s.CreateWith(t.Context(), header("s1"), persistence.Record{Kind: "message", Data: data}, rec("descriptor", `{"n":2}`))
	if err != nil || seq != 2 {
		t.Fatalf("CreateWith: got %d, %v; want 2, nil", seq, err)
	}
	copy(data, `{"n":9}`) // the store kept its own copy
	h, recs := mustLoad(t, s, "s1")
	if h != header("s1") {
		t.Fatalf("header: got %+v, want %+v", h, header("s1"))
	}
	wantRecords(t, recs, rec("message", `{"n":1}`), rec("descriptor", `{"n":2}`))
	// The log goes on from the records CreateWith stored.
	mustAppendAt(t, s, "s1", 2, 3, rec("message", `3`))
	wantEntries(t, mustLoadFrom(t, s, "s1", 0),
		entry(1, "message", `{"n":1}`), entry(2, "descriptor", `{"n":2}`), entry(3, "message", `3`))

	// With no records it is Create.
	if seq, err := s.CreateWith(t.Context(), header("empty")); err != nil || seq != 0 {
		t.Fatalf("CreateWith(no records): got %d, %v; want 0, nil", seq, err)
	}
	mustAppendAt(t, s, "empty", 0, 1, rec("message", `1`))
}

// testCreateWithIsAtomic checks that a CreateWith that fails leaves no
// session behind, in any listing, and that the id is free afterwards.
func testCreateWithIsAtomic(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustCreate(t, s, header("taken"))
	mustAppend(t, s, "taken", rec("message", `"kept"`))
	_, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: "taken"}, rec("message", `"new"`))
	wantErr(t, "CreateWith(taken)", err, persistence.ErrExists)
	h, recs := mustLoad(t, s, "taken")
	if h != header("taken") {
		t.Fatalf("CreateWith(taken) replaced the header: %+v", h)
	}
	wantRecords(t, recs, rec("message", `"kept"`))

	for _, bad := range []persistence.Record{rec("", `3`), rec("message", `{"torn":`), {Kind: "message"}} {
		_, err := s.CreateWith(ctx, header("new"), rec("message", `1`), rec("message", `2`), bad)
		wantErr(t, fmt.Sprintf("CreateWith(..., %+v)", bad), err, persistence.ErrInvalid)
	}
	_, err = s.CreateWith(ctx, subagent.SessionHeader{SessionID: "new", DelegationDepth: -1}, rec("message", `1`))
	wantErr(t, "CreateWith(negative depth)", err, persistence.ErrInvalid)
	_, err = s.Header(ctx, "new")
	wantErr(t, "Header after the failed CreateWiths", err, persistence.ErrNotFound)
	if infos, err := s.Sessions(ctx); err != nil || len(infos) != 1 {
		t.Fatalf("Sessions after failed CreateWith: got %+v, %v; want only %q", infos, err, "taken")
	}
	if infos, err := s.Children(ctx, header("new").ParentSessionID); err != nil || len(infos) != 0 {
		t.Fatalf("Children after failed CreateWith: got %+v, %v; want none", infos, err)
	}
	// The id is free, and numbering starts at 1.
	if seq, err := s.CreateWith(ctx, header("new"), rec("message", `"only"`)); err != nil || seq != 1 {
		t.Fatalf("CreateWith after the failures: got %d, %v; want 1, nil", seq, err)
	}
	wantEntries(t, mustLoadFrom(t, s, "new", 0), entry(1, "message", `"only"`))
}

// testAppendAtFencesALateWriter has two writers read the same log end;
// the first to append wins and the second gets a conflict it can
// resynchronise from, and the log holds only the winner's records.
func testAppendAtFencesALateWriter(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `1`), rec("message", `2`))
	infos, err := s.Sessions(ctx)
	if err != nil || len(infos) != 1 || infos[0].LastSeq != 2 {
		t.Fatalf("Sessions: got %+v, %v; want s1 at 2", infos, err)
	}
	readA, readB := infos[0].LastSeq, infos[0].LastSeq

	mustAppendAt(t, s, "s1", readA, 4, rec("message", `"a1"`), rec("message", `"a2"`)) // writer A
	_, err = s.AppendAt(ctx, "s1", readB, rec("message", `"b1"`))
	wantConflict(t, err, "s1", 2, 4)
	wantEntries(t, mustLoadFrom(t, s, "s1", 0),
		entry(1, "message", `1`), entry(2, "message", `2`), entry(3, "message", `"a1"`), entry(4, "message", `"a2"`))

	// B catches up from where it was and tries again.
	wantEntries(t, mustLoadFrom(t, s, "s1", readB), entry(3, "message", `"a1"`), entry(4, "message", `"a2"`))
	mustAppendAt(t, s, "s1", 4, 5, rec("message", `"b1"`))
	// Expecting more than there is conflicts too.
	_, err = s.AppendAt(ctx, "s1", 9, rec("message", `"ahead"`))
	wantConflict(t, err, "s1", 9, 5)
	// With no records it only checks.
	mustAppendAt(t, s, "s1", 5, 5)
	_, err = s.AppendAt(ctx, "s1", 4)
	wantConflict(t, err, "s1", 4, 5)
	_, err = s.AppendAt(ctx, "nope", 0, rec("message", `1`))
	wantErr(t, "AppendAt(unknown)", err, persistence.ErrNotFound)
	_, err = s.AppendAt(ctx, "nope", 0)
	wantErr(t, "AppendAt(unknown) of nothing", err, persistence.ErrNotFound)
	_, recs := mustLoad(t, s, "s1")
	if len(recs) != 5 {
		t.Fatalf("got %d records, want 5: %s", len(recs), show(recs))
	}
}

func testAppendAtRefusesBadInputFirst(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `1`))
	for _, expect := range []uint64{1, 7} {
		_, err := s.AppendAt(t.Context(), "s1", expect, rec("message", `2`), rec("", `3`))
		wantErr(t, fmt.Sprintf("AppendAt(%d) with an invalid record", expect), err, persistence.ErrInvalid)
	}
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), entry(1, "message", `1`))
}

// testAppendAtConcurrentOneWinnerPerSeq has many writers race to extend
// one log with AppendAt, each resynchronising from the conflicts it gets:
// every expected end is won exactly once, and the log holds the winners'
// records in order. Run it with -race.
func testAppendAtConcurrentOneWinnerPerSeq(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	const writers, length = 8, 40
	type win struct{ writer, expect int }
	var (
		mu   sync.Mutex
		wins []win
		wg   sync.WaitGroup
	)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			// Every call either wins or moves expect forward, so the
			// loop ends; the bound catches a store that does neither.
			expect := uint64(0)
			for tries := 0; expect < length; tries++ {
				if tries > 4*writers*length {
					errs <- fmt.Errorf("writer %d: no progress after %d calls", w, tries)
					return
				}
				seq, err := s.AppendAt(context.Background(), "s1", expect, rec("message", fmt.Sprintf(`{"w":%d,"e":%d}`, w, expect)))
				var ce *persistence.ConflictError
				switch {
				case err == nil && seq == expect+1:
					mu.Lock()
					wins = append(wins, win{w, int(expect)})
					mu.Unlock()
					expect = seq
				case err == nil:
					errs <- fmt.Errorf("writer %d: AppendAt(%d) returned %d, want %d", w, expect, seq, expect+1)
					return
				case errors.As(err, &ce) && ce.Actual > expect:
					expect = ce.Actual
				default:
					errs <- fmt.Errorf("writer %d: AppendAt(%d): %v", w, expect, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	winner := make([]int, length)
	for i := range winner {
		winner[i] = -1
	}
	for _, w := range wins {
		if winner[w.expect] != -1 {
			t.Fatalf("expected end %d won twice, by writers %d and %d", w.expect, winner[w.expect], w.writer)
		}
		winner[w.expect] = w.writer
	}
	var want []persistence.Entry
	for e, w := range winner {
		if w == -1 {
			t.Fatalf("expected end %d was never won", e)
		}
		want = append(want, entry(uint64(e+1), "message", fmt.Sprintf(`{"w":%d,"e":%d}`, w, e)))
	}
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), want...)
}

// testCompactKeepsLogOnlyRecords (D4): descriptor-like records at or
// below upTo survive with their sequence numbers and order, the messages
// give way to one summary under the last one's number, and the log still
// ends where it did.
func testCompactKeepsLogOnlyRecords(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	_, err := s.CreateWith(ctx, header("s1"),
		rec("subagent/descriptor", `{"version":1}`), // 1
		rec("message", `"m2"`),                      // 2
		rec("message", `"m3"`),                      // 3
		rec("custom/note", `"n4"`),                  // 4
		rec("message", `"m5"`),                      // 5
		rec("message", `"m6"`),                      // 6
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, "s1", 5, rec("message", `"summary of 2-5"`)); err != nil {
		t.Fatalf("Compact(5): %v", err)
	}
	want := []persistence.Entry{
		entry(1, "subagent/descriptor", `{"version":1}`),
		entry(4, "custom/note", `"n4"`),
		entry(5, "message", `"summary of 2-5"`),
		entry(6, "message", `"m6"`),
	}
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), want...)
	_, recs := mustLoad(t, s, "s1")
	wantRecords(t, recs, want[0].Record, want[1].Record, want[2].Record, want[3].Record)
	// Reading from inside a gap starts at the next survivor.
	wantEntries(t, mustLoadFrom(t, s, "s1", 2), want[1:]...)
	wantEntries(t, mustLoadFrom(t, s, "s1", 4), want[2:]...)
	if infos, err := s.Children(ctx, header("s1").ParentSessionID); err != nil || len(infos) != 1 || infos[0].LastSeq != 6 {
		t.Fatalf("Children after Compact: got %+v, %v; want s1 ending at 6", infos, err)
	}
	// A writer that read the log before the compaction still appends.
	mustAppendAt(t, s, "s1", 6, 7, rec("message", `"m7"`))
	_, err = s.AppendAt(ctx, "s1", 6, rec("message", `"late"`))
	wantConflict(t, err, "s1", 6, 7)
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), append(want, entry(7, "message", `"m7"`))...)
}

// testCompactAtTheLogsEndAndAgain compacts the last record, so the
// summary ends the log, then compacts again over the first summary.
func testCompactAtTheLogsEndAndAgain(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	if _, err := s.CreateWith(ctx, header("s1"), rec("message", `1`), rec("subagent/descriptor", `2`), rec("message", `3`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, "s1", 3, rec("message", `"s1"`)); err != nil {
		t.Fatalf("Compact(3): %v", err)
	}
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), entry(2, "subagent/descriptor", `2`), entry(3, "message", `"s1"`))
	mustAppendAt(t, s, "s1", 3, 5, rec("message", `4`), rec("message", `5`))
	// The first summary is model-visible, so the second takes it in.
	if err := s.Compact(ctx, "s1", 4, rec("message", `"s2"`)); err != nil {
		t.Fatalf("second Compact(4): %v", err)
	}
	wantEntries(t, mustLoadFrom(t, s, "s1", 0),
		entry(2, "subagent/descriptor", `2`), entry(4, "message", `"s2"`), entry(5, "message", `5`))
	mustAppendAt(t, s, "s1", 5, 6, rec("message", `6`))
}

func testCompactInvalidChangesNothing(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	if _, err := s.CreateWith(ctx, header("s1"), rec("subagent/descriptor", `1`), rec("message", `2`)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, header("empty"))
	good := rec("message", `"summary"`)
	for _, c := range []struct {
		name    string
		id      string
		upTo    uint64
		summary persistence.Record
	}{
		{"UpToZero", "s1", 0, good},
		{"PastTheEnd", "s1", 3, good},
		{"NoMessageAtOrBelow", "s1", 1, good},
		{"EmptyLog", "empty", 1, good},
		{"SummaryWithoutKind", "s1", 2, rec("", `"x"`)},
		{"SummaryNotJSON", "s1", 2, rec("message", `{"torn":`)},
	} {
		wantErr(t, c.name+": Compact", s.Compact(ctx, c.id, c.upTo, c.summary), persistence.ErrInvalid)
	}
	wantErr(t, "Compact(unknown)", s.Compact(ctx, "nope", 1, good), persistence.ErrNotFound)
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), entry(1, "subagent/descriptor", `1`), entry(2, "message", `2`))
	wantEntries(t, mustLoadFrom(t, s, "empty", 0))
}

func testEndedContextNewCalls(t *testing.T, s persistence.Store) {
	mustCreate(t, s, header("s1"))
	mustAppend(t, s, "s1", rec("message", `1`))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, errCreateWith := s.CreateWith(ctx, header("s2"), rec("message", `1`))
	_, errAppendAt := s.AppendAt(ctx, "s1", 1, rec("message", `2`))
	_, _, errLoadFrom := s.LoadFrom(ctx, "s1", 0)
	_, errHeader := s.Header(ctx, "s1")
	_, errSessions := s.Sessions(ctx)
	_, errChildren := s.Children(ctx, header("s1").ParentSessionID)
	errCompact := s.Compact(ctx, "s1", 1, rec("message", `"summary"`))
	for name, err := range map[string]error{
		"CreateWith": errCreateWith, "AppendAt": errAppendAt, "LoadFrom": errLoadFrom, "Header": errHeader,
		"Sessions": errSessions, "Children": errChildren, "Compact": errCompact,
	} {
		wantErr(t, name, err, context.Canceled)
	}
	_, err := s.Header(t.Context(), "s2")
	wantErr(t, "Header of the session CreateWith got with an ended context", err, persistence.ErrNotFound)
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), entry(1, "message", `1`))
}
