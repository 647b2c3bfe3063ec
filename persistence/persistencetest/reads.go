package persistencetest

import (
	"testing"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func testLoadFromReturnsSequenceNumbers(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustCreate(t, s, header("s1"))
	wantEntries(t, mustLoadFrom(t, s, "s1", 0))
	mustAppend(t, s, "s1", rec("message", `1`), rec("descriptor", `2`))
	mustAppend(t, s, "s1", rec("message", `3`), rec("message", `4`), rec("message", `5`))
	all := []persistence.Entry{
		entry(1, "message", `1`), entry(2, "descriptor", `2`), entry(3, "message", `3`),
		entry(4, "message", `4`), entry(5, "message", `5`),
	}
	h, got, err := s.LoadFrom(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h != header("s1") {
		t.Fatalf("LoadFrom header: got %+v, want %+v", h, header("s1"))
	}
	wantEntries(t, got, all...)
	wantEntries(t, mustLoadFrom(t, s, "s1", 2), all[2:]...)
	wantEntries(t, mustLoadFrom(t, s, "s1", 4), all[4:]...)
	wantEntries(t, mustLoadFrom(t, s, "s1", 5))
	wantEntries(t, mustLoadFrom(t, s, "s1", 99))
	wantEntries(t, mustLoadFrom(t, s, "s1", ^uint64(0)))

	// What comes out is a copy.
	got[0].Data[0] = '9'
	got[0].Kind = "changed"
	wantEntries(t, mustLoadFrom(t, s, "s1", 0), all...)

	_, _, err = s.LoadFrom(ctx, "nope", 0)
	wantErr(t, "LoadFrom(unknown)", err, persistence.ErrNotFound)
}

func testHeader(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	h := subagent.SessionHeader{SessionID: "s1", ParentSessionID: "p", DelegationDepth: 3}
	mustCreate(t, s, h)
	mustAppend(t, s, "s1", rec("message", `1`))
	if got, err := s.Header(ctx, "s1"); err != nil || got != h {
		t.Fatalf("Header: got %+v, %v; want %+v", got, err, h)
	}
	_, err := s.Header(ctx, "nope")
	wantErr(t, "Header(unknown)", err, persistence.ErrNotFound)
	if err := s.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Header(ctx, "s1")
	wantErr(t, "Header after Delete", err, persistence.ErrNotFound)
}

// info is the SessionInfo a case expects.
func info(id, parent string, last uint64) persistence.SessionInfo {
	return persistence.SessionInfo{Header: subagent.SessionHeader{SessionID: id, ParentSessionID: parent}, LastSeq: last}
}

func wantInfos(t *testing.T, what string, got []persistence.SessionInfo, err error, want ...persistence.SessionInfo) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i] == want[i]
	}
	if !ok {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}

// testSessionsInCreationOrder creates sessions in an order that is
// neither the ids' order nor their reverse, and checks that Sessions
// follows it, with each log's end, and that a re-created id goes last.
func testSessionsInCreationOrder(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	got, err := s.Sessions(ctx)
	wantInfos(t, "Sessions of an empty store", got, err)
	for _, c := range []struct {
		id, parent string
		recs       int
	}{{"b", "p1", 2}, {"a", "", 0}, {"c", "p1", 1}} {
		recs := make([]persistence.Record, c.recs)
		for i := range recs {
			recs[i] = rec("message", `1`)
		}
		if _, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: c.id, ParentSessionID: c.parent}, recs...); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "a", rec("message", `1`))
	got, err = s.Sessions(ctx)
	wantInfos(t, "Sessions", got, err, info("b", "p1", 2), info("a", "", 1), info("c", "p1", 1))
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, subagent.SessionHeader{SessionID: "b"})
	got, err = s.Sessions(ctx)
	wantInfos(t, "Sessions after re-creating b", got, err, info("a", "", 1), info("c", "p1", 1), info("b", "", 0))
}

// testChildrenByParent checks that Children returns exactly one parent's
// children in creation order: not grandchildren, not the children of a
// parent whose id extends this one's, and not deleted ones.
func testChildrenByParent(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	for _, h := range []subagent.SessionHeader{
		{SessionID: "z", ParentSessionID: "p"},
		{SessionID: "y", ParentSessionID: "p1"},
		{SessionID: "x", ParentSessionID: "p"},
		{SessionID: "w", ParentSessionID: "z"}, // a grandchild of p
		{SessionID: "p"},
		{SessionID: "v", ParentSessionID: "p"},
	} {
		mustCreate(t, s, h)
	}
	mustAppend(t, s, "x", rec("message", `1`), rec("message", `2`))
	got, err := s.Children(ctx, "p")
	wantInfos(t, "Children(p)", got, err, info("z", "p", 0), info("x", "p", 2), info("v", "p", 0))
	got, err = s.Children(ctx, "p1")
	wantInfos(t, "Children(p1)", got, err, info("y", "p1", 0))
	got, err = s.Children(ctx, "z")
	wantInfos(t, "Children(z)", got, err, info("w", "z", 0))
	got, err = s.Children(ctx, "nobody")
	wantInfos(t, "Children(nobody)", got, err)
	_, err = s.Children(ctx, "")
	wantErr(t, `Children("")`, err, persistence.ErrInvalid)
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	got, err = s.Children(ctx, "p")
	wantInfos(t, "Children(p) after Delete(x)", got, err, info("z", "p", 0), info("v", "p", 0))
	// Re-created under another parent, x is that parent's child only.
	mustCreate(t, s, subagent.SessionHeader{SessionID: "x", ParentSessionID: "p1"})
	got, err = s.Children(ctx, "p")
	wantInfos(t, "Children(p) after re-creating x", got, err, info("z", "p", 0), info("v", "p", 0))
	got, err = s.Children(ctx, "p1")
	wantInfos(t, "Children(p1) after re-creating x", got, err, info("y", "p1", 0), info("x", "p1", 0))
}
