package persistencetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// deferredCreator is a store with CreateDeferred (see persistence's
// deferredCreator): a deferred session is a session to every call of the
// store from the moment it is created, and its first write stores it
// whole. Run runs these cases for a store that has it.
type deferredCreator interface {
	persistence.Store
	CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error)
}

var deferredCases = []testCase[deferredCreator]{
	{"DeferredIsASessionAtOnce", testDeferredIsASessionAtOnce},
	{"DeferredFirstWriteStoresItWhole", testDeferredFirstWriteStoresItWhole},
	{"DeferredDelete", testDeferredDelete},
	{"DeferredRefusesWhatCreateWithRefuses", testDeferredRefusesWhatCreateWithRefuses},
}

func mustDefer(t *testing.T, s deferredCreator, h subagent.SessionHeader, recs ...persistence.Record) {
	t.Helper()
	if seq, err := s.CreateDeferred(t.Context(), h, recs...); err != nil || seq != uint64(len(recs)) {
		t.Fatalf("CreateDeferred(%q): %d, %v; want %d", h.SessionID, seq, err, len(recs))
	}
}

func ids(infos []persistence.SessionInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Header.SessionID
	}
	return out
}

func testDeferredIsASessionAtOnce(t *testing.T, s deferredCreator) {
	ctx := t.Context()
	mustCreate(t, s, header("before"))
	h := header("d")
	mustDefer(t, s, h, rec("message", `1`), rec("log", `{"a":2}`))
	got, recs := mustLoad(t, s, "d")
	if got != h {
		t.Fatalf("header %+v, want %+v", got, h)
	}
	wantRecords(t, recs, rec("message", `1`), rec("log", `{"a":2}`))
	if got, err := s.Header(ctx, "d"); err != nil || got != h {
		t.Fatalf("Header: %+v, %v", got, err)
	}
	if _, entries, err := s.LoadFrom(ctx, "d", 1); err != nil || len(entries) != 1 || entries[0].Seq != 2 {
		t.Fatalf("LoadFrom(1): %+v, %v", entries, err)
	}
	all, err := s.Sessions(ctx)
	if err != nil || !slices.Equal(ids(all), []string{"before", "d"}) || all[1].LastSeq != 2 {
		t.Fatalf("Sessions: %+v, %v", all, err)
	}
	kids, err := s.Children(ctx, h.ParentSessionID)
	if err != nil || !slices.Equal(ids(kids), []string{"d"}) {
		t.Fatalf("Children: %+v, %v", kids, err)
	}
	if kids, err := s.Children(ctx, "someone-else"); err != nil || len(kids) != 0 {
		t.Fatalf("Children of another parent: %+v, %v", kids, err)
	}
	if err := s.Append(ctx, "d"); err != nil {
		t.Fatalf("empty Append: %v", err)
	}
	mustAppendAt(t, s, "d", 2, 2)
	var conflict *persistence.ConflictError
	if _, err := s.AppendAt(ctx, "d", 1, rec("message", `3`)); !errors.As(err, &conflict) || conflict.Actual != 2 {
		t.Fatalf("AppendAt(1) on a log ending at 2: %v, want a conflict at 2", err)
	}
	_, err = s.CreateWith(ctx, header("d"))
	wantErr(t, "CreateWith of a deferred id", err, persistence.ErrExists)
	_, err = s.CreateDeferred(ctx, header("d"))
	wantErr(t, "CreateDeferred of a deferred id", err, persistence.ErrExists)
	_, err = s.CreateDeferred(ctx, header("before"))
	wantErr(t, "CreateDeferred of a stored id", err, persistence.ErrExists)
	// Refused writes changed nothing.
	_, recs = mustLoad(t, s, "d")
	wantRecords(t, recs, rec("message", `1`), rec("log", `{"a":2}`))
}

func testDeferredFirstWriteStoresItWhole(t *testing.T, s deferredCreator) {
	ctx := t.Context()
	for _, write := range []struct {
		name string
		f    func(id string) error
	}{
		{"Append", func(id string) error { return s.Append(ctx, id, rec("message", `3`)) }},
		{"AppendAt", func(id string) error { _, err := s.AppendAt(ctx, id, 2, rec("message", `3`)); return err }},
	} {
		id := "d-" + write.name
		mustDefer(t, s, header(id), rec("message", `1`), rec("log", `2`))
		if err := write.f(id); err != nil {
			t.Fatalf("%s: %v", write.name, err)
		}
		_, entries, err := s.LoadFrom(ctx, id, 0)
		if err != nil || len(entries) != 3 || entries[0].Seq != 1 || entries[2].Seq != 3 {
			t.Fatalf("%s: LoadFrom: %+v, %v", write.name, entries, err)
		}
		mustAppendAt(t, s, id, 3, 4, rec("message", `4`))
	}
	all, err := s.Sessions(ctx)
	if err != nil || !slices.Equal(ids(all), []string{"d-Append", "d-AppendAt"}) {
		t.Fatalf("Sessions: %v, %v", ids(all), err)
	}
	mustDefer(t, s, header("c"), rec("message", `1`))
	if err := s.Compact(ctx, "c", 1, rec("message", `"summary"`)); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	_, recs := mustLoad(t, s, "c")
	wantRecords(t, recs, rec("message", `"summary"`))
}

func testDeferredDelete(t *testing.T, s deferredCreator) {
	ctx := t.Context()
	mustDefer(t, s, header("d"), rec("message", `1`))
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, err := s.Load(ctx, "d")
	wantErr(t, "Load after Delete", err, persistence.ErrNotFound)
	wantErr(t, "Append after Delete", s.Append(ctx, "d", rec("message", `2`)), persistence.ErrNotFound)
	wantErr(t, "second Delete", s.Delete(ctx, "d"), persistence.ErrNotFound)
	if all, err := s.Sessions(ctx); err != nil || len(all) != 0 {
		t.Fatalf("Sessions: %v, %v", ids(all), err)
	}
	// The id is free again.
	mustDefer(t, s, header("d"))
}

func testDeferredRefusesWhatCreateWithRefuses(t *testing.T, s deferredCreator) {
	ctx := t.Context()
	for _, c := range []struct {
		h    subagent.SessionHeader
		recs []persistence.Record
	}{
		{subagent.SessionHeader{}, nil},
		{subagent.SessionHeader{SessionID: "x", DelegationDepth: -1}, nil},
		{header("x"), []persistence.Record{rec("", `1`)}},
		{header("x"), []persistence.Record{rec("message", `{`)}},
	} {
		_, err := s.CreateDeferred(ctx, c.h, c.recs...)
		wantErr(t, fmt.Sprintf("CreateDeferred(%+v, %s)", c.h, show(c.recs)), err, persistence.ErrInvalid)
	}
	_, _, err := s.Load(ctx, "x")
	wantErr(t, "Load after the refused creates", err, persistence.ErrNotFound)
}
