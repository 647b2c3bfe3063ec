package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/testkit"
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
// disk, and the growth of its peak live heap from the small tree to the
// large one, per entry added, stays under maxBytesPerEntry. The live heap
// is what the runtime's GC trace reports marked after each cycle, with
// cycles made frequent (GOGC=5): resident memory also counts garbage the
// collector has not reached yet, which on a loaded machine varies by more
// than the growth measured.
func TestK3_SurveyMemoryIsBoundedPerEntry(t *testing.T) {
	const folders = 40
	peak := func(perFolder int) (mb int) {
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
		cmd := exec.CommandContext(testkit.Ctx(t), bin, "run", "-quiet", "-dir", root)
		cmd.Env = append(os.Environ(), envDataDir+"="+t.TempDir(), "GODEBUG=gctrace=1", "GOGC=5")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if want := (figures{files: folders * perFolder, lines: folders * perFolder, bytes: 2 * folders * perFolder}).String(); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("node run: %v, answer %q (want %q), stderr %s", err, out, want, stderr.Bytes())
		}
		return peakLive(t, stderr.Bytes())
	}
	small, large := peak(50), peak(800)
	perEntry := float64(large-small) * (1 << 20) / float64(folders*(800-50))
	t.Logf("peak live heap %d MB for %d entries, %d MB for %d: %.0f B per entry", small, folders*50, large, folders*800, perEntry)
	if perEntry > maxBytesPerEntry {
		t.Fatalf("peak resident memory grows %.0f B per directory entry walked, want at most %d", perEntry, maxBytesPerEntry)
	}
}

// gcLive finds the live heap a GC trace line (GODEBUG=gctrace=1) reports:
// "gc 7 @0.1s 2%: ..., 4->5->2 MB, ..." is 2 MB marked live.
var gcLive = regexp.MustCompile(`(?m)^gc \d+ @.*, \d+->\d+->(\d+) MB`)

// peakLive is the largest live heap, in MB, that the GC trace on a node's
// stderr reports. The peak resident memory that wait4 reports cannot
// stand in for it: a child started with vfork shares the test process's
// memory until it execs, and Linux counts that towards the child's peak.
func peakLive(t *testing.T, stderr []byte) (mb int) {
	t.Helper()
	cycles := gcLive.FindAllSubmatch(stderr, -1)
	if len(cycles) == 0 {
		t.Fatalf("no GC trace on the node's stderr:\n%s", stderr)
	}
	for _, c := range cycles {
		n, err := strconv.Atoi(string(c[1]))
		if err != nil {
			t.Fatal(err)
		}
		mb = max(mb, n)
	}
	return mb
}
