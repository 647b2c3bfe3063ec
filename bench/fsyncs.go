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

// CountSyncs runs argv under strace (following every thread and child)
// and returns how many flushing system calls (syncCalls) it made. bbolt
// calls fdatasync on its file descriptor itself, so no wrapper of the
// *os.File bbolt's Options.OpenFile returns could count them; the kernel's
// view is exact.
func CountSyncs(ctx context.Context, argv ...string) (int, error) {
	out, err := os.CreateTemp("", "subactor-strace-")
	if err != nil {
		return 0, err
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
		return 0, fmt.Errorf("strace %s: %w: %s", strings.Join(argv, " "), err, stderr.Bytes())
	}
	summary, err := os.ReadFile(out.Name())
	if err != nil {
		return 0, err
	}
	return syncsIn(string(summary))
}

// syncsIn reads strace -c's summary: a row per system call, "% time,
// seconds, usecs/call, calls, [errors,] syscall".
func syncsIn(summary string) (int, error) {
	total := 0
	for _, line := range strings.Split(summary, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !syncCalls[f[len(f)-1]] {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return 0, fmt.Errorf("unreadable strace summary line %q", line)
		}
		total += n
	}
	return total, nil
}

// FsyncResult is the flushes per delegation on bbolt, and delegations per
// second with parents delegating at once on bbolt (group commit).
type FsyncResult struct {
	Delegations   int     `json:"delegations"`
	ParentRuns    int     `json:"parentRuns"`
	PerDelegation float64 `json:"fsyncsPerDelegation"`
	PerParentRun  float64 `json:"fsyncsPerParentRun"`
	// OpenClose is what opening and closing the store flushed.
	OpenClose int              `json:"fsyncsOpenClose"`
	Parallel  []ParallelResult `json:"parallel"`
	Error     string           `json:"error,omitempty"`
}
