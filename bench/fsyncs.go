package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/subactor/subactor/persistence"
)

// FsyncProbe runs n delegations (SubactorSpawnBolt's: start, result,
// dispose, one after another) on a fresh bbolt store in dir, or with
// parentRuns n parent runs of one delegation each (SubactorParentRunBolt's),
// so that a tracer outside the process can count their fsyncs: n = 0
// counts what opening and closing the store cost alone.
func FsyncProbe(ctx context.Context, dir string, n int, parentRuns bool) error {
	store, err := persistence.OpenBolt(filepath.Join(dir, "probe.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	var do func() error
	var done func()
	if parentRuns {
		do, done, err = parentRunsOn(ctx, store, false)
	} else {
		do, done, err = spawnDelegations(ctx, store)
	}
	if err != nil {
		return err
	}
	defer done()
	for range n {
		if err := do(); err != nil {
			return err
		}
	}
	return nil
}

// syncCalls are the system calls that flush a file to its disk.
var syncCalls = map[string]bool{"fsync": true, "fdatasync": true, "sync_file_range": true, "syncfs": true, "sync": true, "msync": true}

// Syncs are the flushing system calls of a run: all of them, and the
// fsyncs among them. bbolt flushes a commit with fdatasync (twice: its
// pages, then its meta page) and fsyncs its file only when it grows it.
type Syncs struct{ All, Fsync int }

// CountSyncs runs argv under strace (following every thread and child)
// and returns how many flushing system calls (syncCalls) it made. bbolt
// calls fdatasync on its file descriptor itself, so no wrapper of the
// *os.File bbolt's Options.OpenFile returns could count them; the kernel's
// view is exact.
func CountSyncs(ctx context.Context, argv ...string) (Syncs, error) {
	out, err := os.CreateTemp("", "subactor-strace-")
	if err != nil {
		return Syncs{}, err
	}
	out.Close()
	defer os.Remove(out.Name())
	var trace []string
	for name := range syncCalls {
		trace = append(trace, name)
	}
	cmd := exec.CommandContext(ctx, "strace", append([]string{"-f", "-c", "-o", out.Name(), "-e", "trace=" + strings.Join(trace, ",")}, argv...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return Syncs{}, fmt.Errorf("strace %s: %w: %s", strings.Join(argv, " "), err, stderr.Bytes())
	}
	summary, err := os.ReadFile(out.Name())
	if err != nil {
		return Syncs{}, err
	}
	return syncsIn(string(summary))
}

// syncsIn reads strace -c's summary: a row per system call, "% time,
// seconds, usecs/call, calls, [errors,] syscall".
func syncsIn(summary string) (Syncs, error) {
	var s Syncs
	for _, line := range strings.Split(summary, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !syncCalls[f[len(f)-1]] {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return Syncs{}, fmt.Errorf("unreadable strace summary line %q", line)
		}
		s.All += n
		if f[len(f)-1] == "fsync" {
			s.Fsync += n
		}
	}
	return s, nil
}

// FsyncResult is the flushes per delegation on bbolt, and delegations per
// second with parents delegating at once on bbolt (group commit).
type FsyncResult struct {
	Delegations   int     `json:"delegations"`
	ParentRuns    int     `json:"parentRuns"`
	PerDelegation float64 `json:"fsyncsPerDelegation"`
	// GrowthPerDelegation is the part of PerDelegation that bbolt's
	// fsyncs of its growing file make (the rest are its commits').
	GrowthPerDelegation float64 `json:"growthFsyncsPerDelegation"`
	PerParentRun        float64 `json:"fsyncsPerParentRun"`
	// OpenClose is what opening and closing the store flushed.
	OpenClose int              `json:"fsyncsOpenClose"`
	Parallel  []ParallelResult `json:"parallel"`
	Error     string           `json:"error,omitempty"`
}
