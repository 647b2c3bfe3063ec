package persistencetest

import (
	"context"
	"errors"
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

var deferredCases = []struct {
	name string
	f    func(*testing.T, persistence.Store, deferredCreator)
}{
	{"DeferredIsASessionAtOnce", testDeferredIsASessionAtOnce},
	{"DeferredFirstWriteStoresItWhole", testDeferredFirstWriteStoresItWhole},
	{"DeferredDelete", testDeferredDelete},
	{"DeferredRefusesWhatCreateWithRefuses", testDeferredRefusesWhatCreateWithRefuses},
}

func mustDefer(t *testing.T, d deferredCreator, h subagent.SessionHeader, recs ...persistence.Record) {
	t.Helper()
	if seq, err := d.CreateDeferred(t.Context(), h, recs...); err != nil || seq != uint64(len(recs)) {
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

func testDeferredIsASessionAtOnce(t *testing.T, s persistence.Store, d deferredCreator) {
	ctx := t.Context()
	mustCreate(t, s, header("before"))
	h := header("d")
	mustDefer(t, d, h, rec("message", `1`), rec("log", `{"a":2}`))
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
	if seq, err := s.AppendAt(ctx, "d", 2); err != nil || seq != 2 {
		t.Fatalf("empty AppendAt(2): %d, %v", seq, err)
	}
	var conflict *persistence.ConflictError
	if _, err := s.AppendAt(ctx, "d", 1, rec("message", `3`)); !errors.As(err, &conflict) || conflict.Actual != 2 {
		t.Fatalf("AppendAt(1) on a log ending at 2: %v, want a conflict at 2", err)
	}
	if _, err := s.CreateWith(ctx, header("d")); !errors.Is(err, persistence.ErrExists) {
		t.Fatalf("CreateWith of a deferred id: %v, want ErrExists", err)
	}
	if _, err := d.CreateDeferred(ctx, header("d")); !errors.Is(err, persistence.ErrExists) {
		t.Fatalf("CreateDeferred of a deferred id: %v, want ErrExists", err)
	}
	if _, err := d.CreateDeferred(ctx, header("before")); !errors.Is(err, persistence.ErrExists) {
		t.Fatalf("CreateDeferred of a stored id: %v, want ErrExists", err)
	}
	// Refused writes changed nothing.
	_, recs = mustLoad(t, s, "d")
	wantRecords(t, recs, rec("message", `1`), rec("log", `{"a":2}`))
}

func testDeferredFirstWriteStoresItWhole(t *testing.T, s persistence.Store, d deferredCreator) {
	ctx := t.Context()
	for _, write := range []struct {
		name string
		f    func(id string) error
	}{
		{"Append", func(id string) error { return s.Append(ctx, id, rec("message", `3`)) }},
		{"AppendAt", func(id string) error { _, err := s.AppendAt(ctx, id, 2, rec("message", `3`)); return err }},
	} {
		id := "d-" + write.name
		mustDefer(t, d, header(id), rec("message", `1`), rec("log", `2`))
		if err := write.f(id); err != nil {
			t.Fatalf("%s: %v", write.name, err)
		}
		_, entries, err := s.LoadFrom(ctx, id, 0)
		if err != nil || len(entries) != 3 || entries[0].Seq != 1 || entries[2].Seq != 3 {
			t.Fatalf("%s: LoadFrom: %+v, %v", write.name, entries, err)
		}
		if seq, err := s.AppendAt(ctx, id, 3, rec("message", `4`)); err != nil || seq != 4 {
			t.Fatalf("%s: next AppendAt: %d, %v", write.name, seq, err)
		}
	}
	all, err := s.Sessions(ctx)
	if err != nil || !slices.Equal(ids(all), []string{"d-Append", "d-AppendAt"}) {
		t.Fatalf("Sessions: %v, %v", ids(all), err)
	}
	mustDefer(t, d, header("c"), rec("message", `1`))
	if err := s.Compact(ctx, "c", 1, rec("message", `"summary"`)); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	_, recs := mustLoad(t, s, "c")
	wantRecords(t, recs, rec("message", `"summary"`))
}

func testDeferredDelete(t *testing.T, s persistence.Store, d deferredCreator) {
	ctx := t.Context()
	mustDefer(t, d, header("d"), rec("message", `1`))
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := s.Load(ctx, "d"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Load after Delete: %v", err)
	}
	if err := s.Append(ctx, "d", rec("message", `2`)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Append after Delete: %v", err)
	}
	if err := s.Delete(ctx, "d"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if all, err := s.Sessions(ctx); err != nil || len(all) != 0 {
		t.Fatalf("Sessions: %v, %v", ids(all), err)
	}
	// The id is free again.
	mustDefer(t, d, header("d"))
}

func testDeferredRefusesWhatCreateWithRefuses(t *testing.T, s persistence.Store, d deferredCreator) {
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
		if _, err := d.CreateDeferred(ctx, c.h, c.recs...); !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("CreateDeferred(%+v, %s): %v, want ErrInvalid", c.h, show(c.recs), err)
		}
	}
	if _, _, err := s.Load(ctx, "x"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a refused create left a session: %v", err)
	}
}
