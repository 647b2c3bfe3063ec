//go:build unix

package rootfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/rootfile"
	"github.com/subactor/subactor/internal/testkit"
)

// Contract K3: a FIFO, named directly or through a symbolic link, is
// refused for reading and for writing without waiting for its other end
// (which never comes here).
func TestK3_FIFOIsRefusedWithoutWaiting(t *testing.T) {
	dir, r := root(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("pipe", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		for _, name := range []string{"pipe", "link"} {
			for _, open := range []func() (*os.File, error){
				func() (*os.File, error) { return rootfile.Open(r, name) },
				func() (*os.File, error) { return rootfile.Create(r, name, 0o644) },
			} {
				f, err := open()
				if f != nil {
					f.Close()
				}
				if !errors.Is(err, rootfile.ErrNotRegular) {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	if err := testkit.Recv(t, done, "the FIFO to be refused"); err != nil {
		t.Fatalf("want ErrNotRegular, got %v", err)
	}
}
