//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/cmd/node/internal/crashhook"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/boltdamage"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contracts K3, D1, D5: a flipped bit in bbolt's freelist page of a real
// data directory (which made every later run -continue panic inside
// bbolt's commit, and can make bbolt overwrite sessions in silence):
// run -continue exits 1 with the store's typed error, naming the file and
// the repair command, and no panic; sessions still lists, reading only;
// check finds the damage and exits 1; check -repair copies every session,
// each log byte for byte (descriptors, D1, and headers with their depth,
// D5, included), keeps the damaged file beside it, and the session
// continues again.
func TestK3_FreelistBitFlipFailsContinueAndCheckRepairRecoversEverySession(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	id, _ := cutSession(t, stdout)
	listing, _, _ := nodeEnv(t, root, withData(data), "sessions", id)
	lines := parseListing(t, listing)
	if len(lines) < 3 {
		t.Fatalf("sessions %s lists %d sessions, want the top one and its children", id, len(lines))
	}
	logs := map[string][]persistence.Entry{}
	for _, l := range lines {
		logs[l.id] = logOf(t, data, l.id)
	}

	path := filepath.Join(data, storeFile)
	if err := boltdamage.FlipFreelistBit(path, 0); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = nodeEnv(t, root, withData(data), "run", "-continue", id, "again")
	if code != exitFailed || !strings.Contains(stderr, fmt.Sprintf("data directory %q: persistence: %s is damaged", data, path)) ||
		!strings.Contains(stderr, "check -repair -data "+data) || strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("run -continue on a damaged store: exit %d, stderr %q; want exit 1 and the typed error", code, stderr)
	}
	if got, _, code := nodeEnv(t, root, withData(data), "sessions", id); code != 0 || got != listing {
		t.Fatalf("sessions on a damaged store: exit %d\n%s\nwant\n%s", code, got, listing)
	}

	stdout, stderr, code = nodeEnv(t, root, withData(data), "check")
	if code != exitFailed || !strings.Contains(stdout, "damaged: bbolt's pages: page ") || !strings.Contains(stdout, fmt.Sprintf("%d sessions", len(lines))) {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, root, withData(data), "check", "-repair")
	backup := regexp.MustCompile(`kept as (\S+)\n`).FindStringSubmatch(stdout)
	if code != 0 || !strings.Contains(stdout, "repaired: ") || backup == nil {
		t.Fatalf("check -repair: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(backup[1]); err != nil || !strings.HasPrefix(backup[1], path+".damaged-") {
		t.Fatalf("the damaged file is not kept beside the store: %q: %v", backup[1], err)
	}
	if stdout, _, code := nodeEnv(t, root, withData(data), "check"); code != 0 || !strings.Contains(stdout, "no damage found") {
		t.Fatalf("check after repair: exit %d, stdout %q", code, stdout)
	}
	if got, _, _ := nodeEnv(t, root, withData(data), "sessions", id); got != listing {
		t.Fatalf("sessions after repair:\n%s\nwant\n%s", got, listing)
	}
	for sid, want := range logs {
		if got := logOf(t, data, sid); !reflect.DeepEqual(got, want) {
			t.Fatalf("session %s after repair: %d entries, want its %d as they were", sid, len(got), len(want))
		}
	}
	if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet", "-continue", id, "again"); code != 0 {
		t.Fatalf("run -continue after repair: exit %d, stderr %s", code, stderr)
	}
}

// Contract N1: check's arguments and output when there is nothing to
// check, and its place in the help.
func TestN1_CheckUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string // on stdout, or stderr for a failure
	}{
		{[]string{"check", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"check", "-data", memoryData}, exitUsage, "keeps nothing on disk"},
		{[]string{"check", "-bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"check"}, exitOK, "nothing to check"},
		{[]string{"help"}, exitOK, "check [-data DIR] [-repair]"},
	} {
		stdout, stderr, code := node(t, t.TempDir(), c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.out) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, c.out)
		}
	}
}

// Contract N1: node sessions only reads. On a data directory and store
// file that its user cannot write (as root, the test runs it as nobody:
// file modes do not stop root), it lists every session, and the directory
// is left as it was, file bytes and modification time included. That the
// user really cannot write there is shown by run -continue failing.
func TestN1_SessionsOnAReadOnlyDataDirectory(t *testing.T) {
	base, err := os.MkdirTemp("", "node-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	data := filepath.Join(base, "data")
	root := writeTree(t)
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	id, _ := cutSession(t, stdout)
	want, _, _ := nodeEnv(t, root, withData(data), "sessions", id)

	exe, cred := bin, (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		// nobody needs to reach the binary and the data directory.
		exe, cred = copyBinary(t, base, "node"), &syscall.Credential{Uid: 65534, Gid: 65534}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(data, storeFile), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(data, 0o700) })
	before := snapshotDir(t, data)

	as := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(testkit.Ctx(t), exe, args...)
		cmd.Dir = base
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("node %v: %v", args, err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	if got, stderr, code := as("sessions", "-data", data, id); code != 0 || got != want {
		t.Fatalf("sessions on a read-only directory: exit %d, stderr %q\n%s\nwant\n%s", code, stderr, got, want)
	}
	if got, stderr, code := as("sessions", "-data", data); code != 0 || !strings.HasPrefix(got, id+" ") {
		t.Fatalf("sessions (top level) on a read-only directory: exit %d, stdout %q, stderr %q", code, got, stderr)
	}
	if _, stderr, code := as("check", "-data", data); code != 0 {
		t.Fatalf("check on a read-only directory: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := as("run", "-continue", id, "-data", data); code != exitFailed || !strings.Contains(stderr, "permission denied") {
		t.Fatalf("run -continue by the same user: exit %d, stderr %q; want it refused: the directory is not read-only for the test", code, stderr)
	}
	if after := snapshotDir(t, data); !reflect.DeepEqual(after, before) {
		t.Fatalf("the data directory changed:\n%v\nwas\n%v", after, before)
	}
}

// snapshotDir is every file of dir with its size, mode, modification time
// and a digest of its bytes.
func snapshotDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d %v %s %s", e.Name(), fi.Size(), fi.Mode(), fi.ModTime().Format(time.RFC3339Nano), crashhook.Digest(b)))
	}
	return out
}

// Contracts N1, S6: beside a live node run (bbolt's lock keeps every
// other process out of its file), node sessions answers at once: the
// running node lists its sessions, the one in flight running; node check
// says at once which process (its pid) uses the directory. When the run
// has ended its socket is gone, and sessions reads the file again.
func TestN1_SessionsBesideALiveRun(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	hold := openaitest.Reply("done, nothing to count")
	hold.Hold = true
	srv := openaitest.NewServer(t, hold)
	// What starting a node and finding no session costs here, so that the
	// test measures the wait, not the machine.
	began := time.Now()
	if _, stderr, code := node(t, root, "sessions"); code != 0 {
		t.Fatalf("sessions on an empty directory: exit %d, stderr %s", code, stderr)
	}
	baseline := time.Since(began)

	run := exec.CommandContext(testkit.Ctx(t), bin, "run", "-quiet")
	run.Dir = root
	run.Env = append(os.Environ(), append(withData(data), envBaseURL+"="+srv.URL, envAPIKey+"=k", envModel+"=m")...)
	var out, errOut bytes.Buffer
	run.Stdout, run.Stderr = &out, &errOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			run.Process.Kill()
			run.Wait()
		}
	})
	srv.WaitInFlight(t, 1) // the run has its session and waits for its model

	began = time.Now()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "sessions")
	took := time.Since(began)
	lines := parseListing(t, stdout)
	if code != 0 || len(lines) != 1 || lines[0].state != stateInterrupted || lines[0].prompt != "survey ." {
		t.Fatalf("sessions beside a live run: exit %d, stdout %q, stderr %q; want the running session", code, stdout, stderr)
	}
	if took > baseline+time.Second {
		t.Fatalf("sessions beside a live run took %v (a node that finds nothing takes %v)", took, baseline)
	}
	if got, stderr, code := nodeEnv(t, root, withData(data), "sessions", lines[0].id); code != 0 || got != stdout {
		t.Fatalf("sessions %s beside a live run: exit %d, stdout %q, stderr %q", lines[0].id, code, got, stderr)
	}
	_, stderr, code = nodeEnv(t, root, withData(data), "check")
	if code != exitFailed || !strings.Contains(stderr, fmt.Sprintf("it is in use by another node process, pid %d", run.Process.Pid)) {
		t.Fatalf("check beside a live run: exit %d, stderr %q; want the run's pid", code, stderr)
	}

	srv.Release()
	err := run.Wait()
	waited = true
	if err != nil {
		t.Fatalf("run: %v, stderr %s", err, errOut.String())
	}
	if id, _ := cutSession(t, out.String()); id != lines[0].id {
		t.Fatalf("sessions listed %s, the run was %s", lines[0].id, id)
	}
	if _, err := os.Stat(filepath.Join(data, sessionsSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the run left its socket behind: %v", err)
	}
	stdout, _, _ = nodeEnv(t, root, withData(data), "sessions")
	if lines := parseListing(t, stdout); len(lines) != 1 || lines[0].state != "completed" {
		t.Fatalf("sessions after the run: %q", stdout)
	}
}

// Contract N1: beside a process that holds the store and does not answer
// on the socket (this test, as a node from before the socket would), node
// sessions and node check say at once which process it is.
func TestN1_SessionsBesideAHolderThatDoesNotAnswerNamesIt(t *testing.T) {
	data := t.TempDir()
	openData(t, data)
	for _, args := range [][]string{{"sessions"}, {"check"}} {
		_, stderr, code := nodeEnv(t, t.TempDir(), withData(data), args...)
		if code != exitFailed || !strings.Contains(stderr, fmt.Sprintf("data directory %q: it is in use by another node process, pid %d", data, os.Getpid())) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(data); !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == storeFile }) || len(entries) != 1 {
		t.Fatalf("the data directory holds %v, want the store alone", entries)
	}
}

// Contract K4: one bit flipped in the current meta page of a real data
// directory makes bbolt read the commit before it in silence. sessions
// goes on reading that commit and says so once on stderr; check names the
// meta page, the transaction the store reads and the commit lost, and
// exits 1; check -repair keeps every session and the store passes after.
func TestK4_MetaBitFlipIsNamedByCheckAndSessions(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet"); code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	page, txid, err := boltdamage.FlipMetaBit(filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	words := fmt.Sprintf("meta page %d is damaged (its checksum does not match): the store reads transaction %d, the last commit (transaction %d) is lost", page, txid-1, txid)

	stdout, stderr, code := nodeEnv(t, root, withData(data), "sessions")
	if lines := parseListing(t, stdout); code != 0 || len(lines) != 1 || strings.Count(stderr, words) != 1 {
		t.Fatalf("sessions on a flipped meta page: exit %d, stdout %q, stderr %q; want the session and the damage named once", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, root, withData(data), "check")
	if code != exitFailed || !strings.Contains(stdout, "damaged: bbolt's pages: "+words) {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, words)
	}
	if stdout, stderr, code = nodeEnv(t, root, withData(data), "check", "-repair"); code != 0 || !strings.Contains(stdout, "repaired: ") {
		t.Fatalf("check -repair: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, _, code = nodeEnv(t, root, withData(data), "check"); code != 0 || !strings.Contains(stdout, "no damage found") {
		t.Fatalf("check after repair: exit %d, stdout %q", code, stdout)
	}
}

// Contract K4: run on a data directory whose active meta page has one bit
// flipped says so exactly once on stderr, with the transaction the store
// reads back, and goes on: the run completes (exit 0) on the older
// commit, and sessions then lists the earlier session and the new one.
// (A run commits, so bbolt writes over the damaged meta page: this is a
// test of its own, not a step of the one above.)
func TestK4_MetaBitFlipIsNamedOnceByRun(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet"); code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	page, txid, err := boltdamage.FlipMetaBit(filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	words := fmt.Sprintf("meta page %d is damaged (its checksum does not match): the store reads transaction %d, the last commit (transaction %d) is lost", page, txid-1, txid)
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if n := strings.Count(stderr, words); code != 0 || n != 1 || !strings.Contains(stdout, "survey ") {
		t.Fatalf("run on a flipped meta page: exit %d, the damage named %d times, stdout %q, stderr %q; want exit 0, the survey and the damage named once", code, n, stdout, stderr)
	}
	if n := strings.Count(stderr, "meta page"); n != 1 {
		t.Fatalf("run's stderr names a meta page %d times, want once: %q", n, stderr)
	}
	if stdout, stderr, code = nodeEnv(t, root, withData(data), "sessions"); code != 0 || len(parseListing(t, stdout)) != 2 {
		t.Fatalf("sessions after the run: exit %d, stdout %q, stderr %q; want both sessions", code, stdout, stderr)
	}
}

// Contract K4: the "sessions" branch page of a real data directory points
// two elements at one leaf (a listing through it gave two sessions twice,
// and repair dropped the two on the other leaf without a word). sessions
// refuses the file with the damage and the repair command instead of
// listing anything twice; check finds all 60 sessions by reading every
// leaf page and names the one that is damaged itself; check -repair keeps
// the 59 whole ones, names the one it could not keep and exits 1; then
// sessions lists each of the 59 once.
func TestK4_CrossLinkedBranchCheckRepairKeepsEverySession(t *testing.T) {
	data := t.TempDir()
	s := openData(t, data)
	var want []string
	for i := range 60 {
		id := fmt.Sprintf("s%02d", i)
		if _, err := s.CreateWith(t.Context(), subagent.SessionHeader{SessionID: id}, persistence.Record{Kind: "note", Data: []byte(`"x"`)}); err != nil {
			t.Fatal(err)
		}
		if id != "s37" {
			want = append(want, id)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, storeFile)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { // s37's record, one bit off
		sb := tx.Bucket([]byte("sessions")).Bucket([]byte("s37"))
		k, v := sb.Cursor().Last()
		v = bytes.Clone(v)
		v[len(v)-1] ^= 1
		return sb.Put(k, v)
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if err := boltdamage.RelinkSessionsBranch(path, 1, 0); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "sessions")
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "reached twice") || !strings.Contains(stderr, "check -repair -data "+data) {
		t.Fatalf("sessions on a cross-linked branch: exit %d, stdout %q, stderr %q; want exit 1 and the damage", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "check")
	if code != exitFailed || !strings.Contains(stdout, "59 of the 60 sessions found") || !strings.Contains(stdout, `damaged: persistence: session "s37"`) ||
		!strings.Contains(stdout, "reached twice") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "check", "-repair")
	if code != exitFailed || !strings.Contains(stdout, "repaired: "+path+" holds the 59 sessions") || !strings.Contains(stdout, `damaged: persistence: session "s37"`) ||
		!strings.Contains(stdout, "could not be read") {
		t.Fatalf("check -repair: exit %d, stdout %q, stderr %q; want exit 1, 59 kept and s37 named", code, stdout, stderr)
	}
	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "sessions")
	var got []string
	for _, l := range parseListing(t, stdout) {
		got = append(got, l.id)
	}
	if code != 0 || !slices.Equal(got, want) {
		t.Fatalf("sessions after repair: exit %d, stderr %q, listed %q; want each of the 59 once, in creation order", code, stderr, got)
	}
}

// Contract K4: a node killed in its first moments on a fresh data
// directory leaves sessions.db empty, as bbolt's initialisation alone (no
// buckets), or that cut short. Nothing was ever stored: sessions lists
// none, check passes, and the next run works.
func TestK4_FirstOpenKillLeavesAnEmptyStore(t *testing.T) {
	initOnly := func(path string) error {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			return err
		}
		return db.Close()
	}
	for _, c := range []struct {
		name  string
		write func(path string) error
	}{
		{"empty", func(path string) error { return os.WriteFile(path, nil, 0o600) }},
		{"bucketless", initOnly},
		{"cutShort", func(path string) error {
			if err := initOnly(path); err != nil {
				return err
			}
			return os.Truncate(path, 4096)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := writeTree(t)
			data := t.TempDir()
			if err := c.write(filepath.Join(data, storeFile)); err != nil {
				t.Fatal(err)
			}
			if stdout, stderr, code := nodeEnv(t, root, withData(data), "sessions"); code != 0 || stdout != "" || stderr != "" {
				t.Fatalf("sessions: exit %d, stdout %q, stderr %q; want none", code, stdout, stderr)
			}
			if stdout, stderr, code := nodeEnv(t, root, withData(data), "check"); code != 0 || !strings.Contains(stdout, "never held a commit") {
				t.Fatalf("check: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet"); code != 0 {
				t.Fatalf("run: exit %d, stderr %s", code, stderr)
			}
			if stdout, stderr, code := nodeEnv(t, root, withData(data), "sessions"); code != 0 || len(parseListing(t, stdout)) != 1 {
				t.Fatalf("sessions after the run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}
