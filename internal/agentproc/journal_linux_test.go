package agentproc

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/subactor/subactor/internal/ids"
)

// sleeper starts `sleep` carrying tag (none when empty) in its
// environment, in process group pgid (a new group of its own when 0). It
// is killed and reaped when the test ends.
func sleeper(t *testing.T, tag string, pgid int) procRef {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if tag != "" {
		cmd.Env = WithTag(cmd.Env, tag)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return identify(cmd.Process.Pid)
}

// runs reports whether ref's process runs: same start time, no zombie
// (the test is the sleepers' parent and reaps them only at its end).
func runs(ref procRef) bool {
	p, err := procfs.NewProc(ref.PID)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.Starttime == ref.Start && !zombie(st)
}

// journalWith writes recs into a fresh journal directory, with the boot
// id of this machine's boot filled in where empty.
func journalWith(t *testing.T, recs ...groupRecord) string {
	t.Helper()
	dir := t.TempDir()
	j, err := OpenJournal(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Boot == "" {
			r.Boot = j.boot
		}
		if err := j.write(r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// reopen opens the journal in dir as the next node would, and returns
// what it logged.
func reopen(t *testing.T, dir string) string {
	t.Helper()
	var logs bytes.Buffer
	if _, err := OpenJournal(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

func recordFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// deadNode is a node that has gone: this process's pid with another start
// time.
func deadNode() procRef { return procRef{PID: os.Getpid(), Start: 1} }

// Contracts R3, N1, K4: the next node on a journal ends what a dead
// node's agents left: a process that carries an agent's tag (its leader
// too, alive with its recorded start time), and a member of the agent's
// group without the tag once a tagged member shows the group is still the
// agent's (its leader dead). It removes the records and says what it did.
func TestR3_JournalEndsWhatADeadNodeLeft(t *testing.T) {
	member, runaway, living := ids.New(), ids.New(), ids.New()
	leader := sleeper(t, "", 0)
	tagged := sleeper(t, member, leader.PID)
	untagged := sleeper(t, "", leader.PID)
	strayed := sleeper(t, runaway, 0)
	alive := sleeper(t, living, 0)
	// The leader died with its node; its group lives on in its members.
	if err := syscall.Kill(leader.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dir := journalWith(t,
		groupRecord{Tag: member, Node: deadNode(), Leader: leader, Command: []string{"agent", "one"}},
		groupRecord{Tag: runaway, Node: deadNode(), Command: []string{"agent", "two"}},
		groupRecord{Tag: living, Node: deadNode(), Leader: alive, Command: []string{"agent", "three"}},
	)
	logs := reopen(t, dir)
	for name, p := range map[string]procRef{"tagged member": tagged, "untagged member": untagged, "runaway": strayed, "living leader": alive} {
		if !waitNotRunning(p) {
			t.Errorf("the %s (pid %d) survived the next node's start", name, p.PID)
		}
	}
	if files := recordFiles(t, dir); len(files) > 0 {
		t.Errorf("records left: %v", files)
	}
	if !strings.Contains(logs, "ended the processes that agents of an earlier node left running") || !strings.Contains(logs, "agent two") {
		t.Errorf("logs: %s", logs)
	}
}

// waitNotRunning waits a little for a SIGKILLed process to be gone: the
// signal is sent, not awaited.
func waitNotRunning(p procRef) bool {
	return goneWithin(awaitKill, func() bool { return runs(p) })
}

// awaitKill bounds how long a SIGKILLed process may take to end.
const awaitKill = 10 * time.Second

// Contracts K3, K4: the journal never signals a process that does not
// carry the tag of a dead node's record, whatever a record says: not a
// process a forged record names by its pid and real start time, nor the
// leader of a process group (with its members) named so, nor this
// process; and not one whose tag comes from a record of another boot, of
// a node that still runs, or of an agent that started after it.
func TestK4_JournalNeverSignalsAProcessThatDoesNotCarryADeadNodesTag(t *testing.T) {
	unrelated := sleeper(t, "", 0)
	groupLeader := sleeper(t, "", 0)
	groupMember := sleeper(t, "", groupLeader.PID)
	otherBoot, liveNode, later := ids.New(), ids.New(), ids.New()
	ofOtherBoot := sleeper(t, otherBoot, 0)
	ofLiveNode := sleeper(t, liveNode, 0)
	earlier := sleeper(t, later, 0)
	self := identify(os.Getpid())
	dir := journalWith(t,
		groupRecord{Tag: ids.New(), Node: deadNode(), Leader: unrelated},
		groupRecord{Tag: ids.New(), Node: deadNode(), Leader: groupLeader},
		groupRecord{Tag: ids.New(), Node: deadNode(), Leader: self},
		groupRecord{Tag: otherBoot, Boot: "another-boot", Node: deadNode()},
		groupRecord{Tag: liveNode, Node: self},
		groupRecord{Tag: later, Node: deadNode(), Leader: procRef{PID: earlier.PID, Start: earlier.Start + 1}},
	)
	logs := reopen(t, dir)
	for name, p := range map[string]procRef{
		"unrelated process": unrelated, "group leader": groupLeader, "group member": groupMember,
		"other boot's": ofOtherBoot, "live node's": ofLiveNode, "earlier process": earlier,
	} {
		if !runs(p) {
			t.Errorf("the %s (pid %d) was killed", name, p.PID)
		}
	}
	// Only the live node's record stays: it is still in use.
	if files := recordFiles(t, dir); len(files) != 1 || filepath.Base(files[0]) != liveNode+recordExt {
		t.Errorf("records left: %v", files)
	}
	if strings.Contains(logs, "ended the processes") {
		t.Errorf("logs: %s", logs)
	}
}

// Contract K4: the journal reads and removes only regular files named as
// it names them. Others' files (notes.json, mine.json.tmp) survive; a
// FIFO (which would block an open), a link to /dev/zero (an endless
// read), a directory and a 100 MB file, under its own names and others',
// each cost one warning and at most a bounded read; the sweep goes on and
// removes the unreadable record that is its own.
func TestK4_JournalTouchesOnlyItsOwnFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64) {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, name))
		if err == nil {
			err = f.Truncate(size)
		}
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	write("notes.json", 10)
	write("mine.json.tmp", 10)
	write("x.json", 100<<20)
	big := ids.New() + recordExt
	write(big, 100<<20) // its own name: read to the bound, removed
	kept := []string{"notes.json", "mine.json.tmp", "x.json"}
	for _, name := range []string{"fifo.json", ids.New() + recordExt} {
		must(t, syscall.Mkfifo(filepath.Join(dir, name), 0o600))
		kept = append(kept, name)
	}
	for _, name := range []string{"zero.json", ids.New() + recordExt, ids.New() + recordExt + ".tmp"} {
		must(t, os.Symlink("/dev/zero", filepath.Join(dir, name)))
		kept = append(kept, name)
	}
	for _, name := range []string{"sub.json", ids.New() + recordExt} {
		must(t, os.MkdirAll(filepath.Join(dir, name, "inside"), 0o700))
		kept = append(kept, name)
	}
	for range 10 {
		var logs bytes.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := OpenJournal(dir, slog.New(slog.NewTextHandler(&logs, nil)))
			done <- err
		}()
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(awaitKill):
			t.Fatal("OpenJournal blocked on a file of the journal's directory")
		}
		for _, name := range kept {
			if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
				t.Fatalf("%s is gone: %v", name, err)
			}
			if n := strings.Count(logs.String(), filepath.Join(dir, name)); n != 1 {
				t.Errorf("%s named in %d warnings, want 1:\n%s", name, n, logs.String())
			}
		}
		if _, err := os.Lstat(filepath.Join(dir, big)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the journal's own unreadable record is left: %v", err)
		}
	}
}

// Contract K4: a journal directory that is not one (a file of the user's
// in its place) costs a warning, never the node's start.
func TestK4_AJournalPathThatIsAFileDoesNotStopTheNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents")
	must(t, os.WriteFile(dir, []byte("mine"), 0o600))
	var logs bytes.Buffer
	if _, err := OpenJournal(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	if data, err := os.ReadFile(dir); err != nil || string(data) != "mine" || !strings.Contains(logs.String(), "cannot read its directory") {
		t.Fatalf("the file reads %q (%v); logs:\n%s", data, err, logs.String())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
