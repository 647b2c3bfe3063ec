//go:build linux

package persistence_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/subactor/subactor/persistence"
)

// openBreakable opens a Bolt at path and returns a function that breaks
// its file: from then on, writes to it vanish and fdatasync fails with
// EINVAL, like a disk that lost pages it was handed. It works by putting
// /dev/null under bbolt's file descriptor; bbolt's read mapping of the
// real file stays, and the real file keeps only what was acknowledged.
func openBreakable(t *testing.T, path string) (persistence.Backend, func()) {
	t.Helper()
	var file *os.File
	s, err := persistence.OpenBoltWithFile(path, func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, func() {
		t.Helper()
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		if err := syscall.Dup3(int(null.Fd()), int(file.Fd()), syscall.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBoltFailedSyncFailsTheStore: when a commit's fsync fails, the write
// returns ErrFailed wrapping the cause and is not acknowledged, concurrent
// writes fail too, every later call is refused until the store is
// reopened, and the reopened store holds exactly what was acknowledged.
func TestBoltFailedSyncFailsTheStore(t *testing.T) {
	path := boltPath(t)
	s, breakFile := openBreakable(t, path)
	ctx := t.Context()
	create(t, s, "a")
	appendRecs(t, s, "a", msg(`1`))

	breakFile()
	_, err := s.AppendAt(ctx, "a", 1, msg(`"lost"`))
	if !errors.Is(err, persistence.ErrFailed) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("AppendAt with a failing fsync: got %v, want ErrFailed wrapping EINVAL", err)
	}
	t.Log(err)
	// Appenders racing the failure get it too; none is acknowledged.
	var wg sync.WaitGroup
	acked := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			if err := s.Append(context.Background(), "a", msg(`"racer"`)); !errors.Is(err, persistence.ErrFailed) {
				acked <- err
			}
		})
	}
	wg.Wait()
	close(acked)
	for err := range acked {
		t.Errorf("Append after the failure: got %v, want ErrFailed", err)
	}
	errs := newCalls(s, "a")
	_, _, errs["Load"] = s.Load(ctx, "a")
	errs["Create"] = s.Create(ctx, hdr("b"))
	errs["Delete"] = s.Delete(ctx, "a")
	for name, err := range errs {
		if !errors.Is(err, persistence.ErrFailed) {
			t.Errorf("%s after the failure: got %v, want ErrFailed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close of a failed store: %v", err)
	}

	s = openBolt(t, path)
	wantLog(t, s, "a", msg(`1`))
	if seq, err := s.AppendAt(t.Context(), "a", 1, msg(`2`)); err != nil || seq != 2 {
		t.Fatalf("AppendAt(1) after reopen: got %d, %v; want 2, nil", seq, err)
	}
}

// TestBoltFailedSyncLeavesNoHalfCreatedSession: a CreateWith whose fsync
// fails leaves, after the reopen, no session and a free id.
func TestBoltFailedSyncLeavesNoHalfCreatedSession(t *testing.T) {
	path := boltPath(t)
	s, breakFile := openBreakable(t, path)
	create(t, s, "kept")
	breakFile()
	if _, err := s.CreateWith(t.Context(), hdr("a"), msg(`1`), msg(`2`)); !errors.Is(err, persistence.ErrFailed) {
		t.Fatalf("CreateWith with a failing fsync: got %v, want ErrFailed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBolt(t, path)
	ctx := t.Context()
	if _, err := s.Header(ctx, "a"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Header(a) after reopen: got %v, want ErrNotFound", err)
	}
	infos, err := s.Sessions(ctx)
	wantIDs(t, "Sessions after reopen", infos, err, "kept")
	if seq, err := s.CreateWith(ctx, hdr("a"), msg(`1`), msg(`2`)); err != nil || seq != 2 {
		t.Fatalf("CreateWith(a) after reopen: got %d, %v; want 2, nil", seq, err)
	}
	wantLog(t, s, "a", msg(`1`), msg(`2`))
}
