package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
		stdout, stderr, code, peak := nodePeak(t, root, withData(data), c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, named) {
			t.Fatalf("node %v on a flipped meta page: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, named)
		}
		if peak > damagedMemoryCeiling {
			t.Fatalf("node %v on a flipped meta page peaked at %d MiB resident, ceiling %d MiB", c.args, peak>>20, damagedMemoryCeiling>>20)
		}
	}
}

// envPeakRSS makes the test binary a launcher: it runs its arguments as a
// command and writes the command's peak resident bytes to the file the
// variable names. On Linux a process's ru_maxrss starts from the peak of
// the memory it was exec'd from, and os/exec's vfork shares the test
// binary's (hundreds of MiB after a package's tests), so a command started
// straight from the tests would report those as its own; the launcher,
// fresh from its own exec, is small.
const envPeakRSS = "NODETEST_PEAK_RSS_FILE"

// runPeakRSS is the launcher's main.
func runPeakRSS() int {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	if err := os.WriteFile(os.Getenv(envPeakRSS), []byte(strconv.FormatInt(peak, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	return cmd.ProcessState.ExitCode()
}

// nodePeak is nodeEnv through the launcher, with the node's peak resident
// bytes.
func nodePeak(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int, peak int64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "peak")
	stdout, stderr, code = nodeBin(t, self, dir, append(env, envPeakRSS+"="+report), append([]string{bin}, args...)...)
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("node %v: the launcher reported no peak (exit %d, stderr %q): %v", args, code, stderr, err)
	}
	if peak, err = strconv.ParseInt(string(b), 10, 64); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, code, peak
}
