//go:build unix

package fstools_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"
)

// TestFIFOIsRefusedWithoutWaitingForAWriter: read and count open a named
// pipe without blocking until some writer opens it, then refuse it as not
// a regular file.
func TestFIFOIsRefusedWithoutWaitingForAWriter(t *testing.T) {
	root := tree(t, map[string]string{})
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ts := tools(t, root)
	for _, name := range []string{"read", "count"} {
		done := make(chan error, 1)
		go func() {
			_, err := callTool(t, ts[name], `{"path":"pipe"}`)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s of a FIFO: %v", name, err)
			}
		case <-time.After(testkit.Deadline):
			t.Fatalf("%s of a FIFO is still waiting for a writer", name)
		}
	}
}
