package agentproc

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
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

// Contracts R3, N1: the next node on a journal ends what a dead node's
// agents left: a process that carries an agent's tag, a member of the
// agent's group without the tag once a tagged member shows the group is
// still the agent's (its leader dead), and an agent whose leader lives
// with its recorded start time. It removes the records and says what it
// did.
func TestR3_JournalEndsWhatADeadNodeLeft(t *testing.T) {
	leader := sleeper(t, "", 0)
	tagged := sleeper(t, "tag-member", leader.PID)
	untagged := sleeper(t, "", leader.PID)
	runaway := sleeper(t, "tag-runaway", 0)
	alive := sleeper(t, "", 0)
	// The leader died with its node; its group lives on in its members.
	if err := syscall.Kill(leader.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dir := journalWith(t,
		groupRecord{Tag: "tag-member", Node: deadNode(), Leader: leader, Command: []string{"agent", "one"}},
		groupRecord{Tag: "tag-runaway", Node: deadNode(), Command: []string{"agent", "two"}},
		groupRecord{Tag: "tag-alive", Node: deadNode(), Leader: alive, Command: []string{"agent", "three"}},
	)
	logs := reopen(t, dir)
	for name, p := range map[string]procRef{"tagged member": tagged, "untagged member": untagged, "runaway": runaway, "living leader": alive} {
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

// Contract K3: the journal never signals a process that is not its
// agents': not one that reuses a recorded leader's pid (another start
// time), nor one whose tag comes from a record of another boot, of a node
// that still runs, or of an agent that started after it.
func TestK3_JournalNeverSignalsAnotherProcess(t *testing.T) {
	reused := sleeper(t, "", 0)
	otherBoot := sleeper(t, "tag-other-boot", 0)
	liveNodes := sleeper(t, "tag-live-node", 0)
	earlier := sleeper(t, "tag-later-agent", 0)
	dir := journalWith(t,
		groupRecord{Tag: "tag-reused", Node: deadNode(), Leader: procRef{PID: reused.PID, Start: reused.Start - 1}},
		groupRecord{Tag: "tag-other-boot", Boot: "another-boot", Node: deadNode()},
		groupRecord{Tag: "tag-live-node", Node: identify(os.Getpid())},
		groupRecord{Tag: "tag-later-agent", Node: deadNode(), Leader: procRef{PID: 1, Start: earlier.Start + 1}},
	)
	logs := reopen(t, dir)
	for name, p := range map[string]procRef{"reused pid": reused, "other boot's": otherBoot, "live node's": liveNodes, "earlier process": earlier} {
		if !runs(p) {
			t.Errorf("the %s (pid %d) was killed", name, p.PID)
		}
	}
	// Only the live node's record stays: it is still in use.
	if files := recordFiles(t, dir); len(files) != 1 || filepath.Base(files[0]) != "tag-live-node.json" {
		t.Errorf("records left: %v", files)
	}
	if strings.Contains(logs, "ended the processes") {
		t.Errorf("logs: %s", logs)
	}
}
