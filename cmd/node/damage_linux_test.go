package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/testkit/boltdamage"
)

// damagedMemoryCeiling is the stated ceiling of a command on a damaged
// data directory: bbolt's cursor once went round a damaged tree
// allocating until the process died out of memory.
const damagedMemoryCeiling = 256 << 20

// Contract K4 (issue 28 item 5): on a data directory of several runs
// whose active meta page has one bit flipped, sessions, check and run
// -continue each end (within the node command's deadline) and within
// damagedMemoryCeiling of resident memory, naming the damage: sessions
// and run -continue go on with the commit before it, check exits 1.
func TestK4_DamagedMetaCommandsEndWithinTheMemoryCeiling(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	var first string
	for i := range 3 {
		stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
		if code != 0 {
			t.Fatalf("run %d: exit %d, stderr %s", i+1, code, stderr)
		}
		if i == 0 {
			first, _ = cutSession(t, stdout)
		}
	}
	page, txid, err := boltdamage.FlipMetaBit(filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	named := fmt.Sprintf("meta page %d is damaged (its checksum does not match): the store reads transaction %d", page, txid-1)

	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"sessions"}, 0},
		{[]string{"check"}, exitFailed},
		{[]string{"run", "-quiet", "-continue", first, "again"}, 0},
	} {
		stdout, stderr, code, usage := nodeUsage(t, bin, root, withData(data), c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, named) {
			t.Fatalf("node %v on a flipped meta page: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, named)
		}
		if rss := usage.(*syscall.Rusage).Maxrss << 10; rss > damagedMemoryCeiling {
			t.Fatalf("node %v on a flipped meta page peaked at %d MiB resident, ceiling %d MiB", c.args, rss>>20, damagedMemoryCeiling>>20)
		}
	}
}
