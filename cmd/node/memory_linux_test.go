package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/await"
)

// maxBytesPerEntry is the ceiling on the survey's peak resident memory per
// directory entry walked. A survey holds each folder's listing in the
// conversation of the child that tallies it, and counts the files of a
// folder in one call: each entry costs its line in one listing, not a
// count call, its result and their copies in every turn after (that was
// about 670 B an entry, measured).
const maxBytesPerEntry = 400

// Contract K3 (item 9 of issue 18): the survey's memory is bounded per
// directory entry walked across many folders. Two trees of 40 folders
// differ only in how many files each folder holds (50 and 800, half of
// them one level down); the node binary surveys each with its sessions on
// disk, and the growth of its peak resident memory from the small tree to
// the large one, per entry added, stays under maxBytesPerEntry.
func TestK3_SurveyMemoryIsBoundedPerEntry(t *testing.T) {
	const folders = 40
	peak := func(perFolder int) (kib int64) {
		t.Helper()
		root := t.TempDir()
		for f := range folders {
			dir := filepath.Join(root, fmt.Sprintf("d%02d", f))
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range perFolder {
				name := filepath.Join(dir, fmt.Sprintf("file-%05d.txt", i))
				if i%2 == 1 {
					name = filepath.Join(dir, "sub", fmt.Sprintf("file-%05d.txt", i))
				}
				if err := os.WriteFile(name, []byte("x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := exec.CommandContext(await.Ctx(t), bin, "run", "-quiet", "-dir", root)
		cmd.Env = append(os.Environ(), envDataDir+"="+t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if want := fmt.Sprintf("%d files, %d lines, %d bytes", folders*perFolder, folders*perFolder, 2*folders*perFolder); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("node run: %v, answer %q (want %q), stderr %s", err, out, want, stderr.Bytes())
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	}
	small, large := peak(50), peak(800)
	perEntry := float64(large-small) * 1024 / float64(folders*(800-50))
	t.Logf("peak RSS %d KiB for %d entries, %d KiB for %d: %.0f B per entry", small, folders*50, large, folders*800, perEntry)
	if perEntry > maxBytesPerEntry {
		t.Fatalf("peak resident memory grows %.0f B per directory entry walked, want at most %d", perEntry, maxBytesPerEntry)
	}
}
