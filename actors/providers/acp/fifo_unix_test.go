//go:build unix

package acp_test

import (
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract K3: fs requests on a FIFO in the agent's own working directory
// (named directly or through a link) are refused at once, without an OS
// thread waiting in open for the pipe's other end: 500 reads and a write
// all get their error, and the threads the node created stay few.
func TestK3_ACPReadOfFIFOIsRefused(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.ReadFiles, cfg.WriteFiles = true, true
	pipe := filepath.Join(cfg.Dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	must(t, syscall.Symlink("pipe", filepath.Join(cfg.Dir, "link")))
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	const reads = 500
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, cfg), request(
		fmt.Sprintf("readmany %d %s", reads, pipe),
		"read "+filepath.Join(cfg.Dir, "link"),
		"write "+pipe+" x",
	)))
	want := fmt.Sprintf("readmany:0 ok %d refused 0 bounded 0 other;read-error:-32602;write:-32602;", reads)
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Each read blocked in open held a thread of its own: 8 at a time
	// here (the fake's concurrency), 500 without that.
	if created := threads.Count() - before; created > 32 {
		t.Fatalf("%d OS threads created while serving %d reads of a FIFO", created, reads)
	}
}
