package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/pgtest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/postgres"
	"github.com/subactor/subactor/subagent"
)

// pgLog reads a session's log from the PostgreSQL store at url.
func pgLog(t *testing.T, url, id string) []persistence.Entry {
	t.Helper()
	s, err := postgres.Open(testkit.Ctx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, entries, err := s.LoadFrom(testkit.Ctx(t), id, 0)
	if err != nil {
		t.Fatalf("load session %s: %v", id, err)
	}
	return entries
}

// sessionLines is what node sessions prints of the store at url, with a
// data directory of its own, failing the test unless it exits 0.
func sessionLines(t *testing.T, url string, args ...string) []string {
	t.Helper()
	stdout, stderr, code := nodeEnv(t, t.TempDir(), append(withData(t.TempDir()), envStore+"="+url), append([]string{"sessions"}, args...)...)
	if code != 0 {
		t.Fatalf("sessions %v: exit %d, stderr %s", args, code, stderr)
	}
	return strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
}

// Contracts S6 and S9 on PostgreSQL: run keeps its session in the
// database -store names (the data directory gets no sessions.db, only
// what is this machine's), sessions lists it from another data
// directory (SUBACTOR_STORE), and run -continue from a third continues
// the same log with the earlier turns, as on bbolt. check refuses the
// store: it checks bbolt files.
func TestS9_RunSessionsAndContinueOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	root := writeTree(t)
	want, folders := expected(t, root, ".")
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet", "-store", url)
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	top, _ := cutSession(t, stdout)
	if _, err := os.Stat(filepath.Join(data, storeFile)); !os.IsNotExist(err) {
		t.Fatalf("run on PostgreSQL left a %s in the data directory: %v", storeFile, err)
	}
	lines := sessionLines(t, url)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], top+" ") || !strings.Contains(lines[0], "state=completed") {
		t.Fatalf("sessions lists %q, want the one completed session %s", lines, top)
	}
	if tree := sessionLines(t, url, top); len(tree) != 1+len(folders) {
		t.Fatalf("sessions %s lists %d lines, want the session and its %d children:\n%s", top, len(tree), len(folders), strings.Join(tree, "\n"))
	}
	before := pgLog(t, url, top)

	stdout, stderr, code = nodeEnv(t, t.TempDir(), append(withData(t.TempDir()), envStore+"="+url), "run", "-continue", top, "count", "again")
	if code != 0 {
		t.Fatalf("continue: exit %d, stderr %s", code, stderr)
	}
	if id, rest := cutSession(t, stdout); id != top || rest != "\n"+want+"\nnoted: count again\n" {
		t.Fatalf("continued session %s answered\n%s\nwant session %s answering\n%s\nnoted: count again", id, rest, top, want)
	}
	after := pgLog(t, url, top)
	checkPrefix(t, before, after)
	if added := messages(t, after[len(before):]); len(added) != 2 || added[0].Role != agent.User || subagent.TextOf(added[0].Content) != "count again" {
		t.Fatalf("continuing added %+v, want the prompt and the answer", added)
	}

	_, stderr, code = nodeEnv(t, root, append(withData(data), envStore+"="+url), "check")
	if code != exitUsage || !strings.Contains(stderr, "which check does not check: it checks a data directory's "+storeFile) {
		t.Fatalf("check on PostgreSQL: exit %d, stderr %q; want exit %d saying it checks bbolt files", code, stderr, exitUsage)
	}
	// A bad -store is a usage error that does not echo a password.
	_, stderr, code = node(t, root, "sessions", "-store", "mysql://u:secret@h/db")
	if code != exitUsage || !strings.Contains(stderr, "not a postgres:// URL") || strings.Contains(stderr, "secret") {
		t.Fatalf("sessions -store mysql://: exit %d, stderr %q", code, stderr)
	}
}

// Contract K2 (the node's part): two node processes, each with a data
// directory of its own, run at once on one PostgreSQL database; both
// sessions and all their children land in it, and a session one node ran
// is continued by the other.
func TestK2_TwoNodeProcessesShareOnePostgresDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	root := writeTree(t)
	want, folders := expected(t, root, ".")
	ctx := testkit.Ctx(t)
	type result struct {
		stdout, stderr bytes.Buffer
		cmd            *exec.Cmd
	}
	var runs [2]*result
	for i := range runs {
		r := &result{cmd: exec.CommandContext(ctx, bin, "run", "-quiet")}
		r.cmd.Dir = root
		r.cmd.Env = append(os.Environ(), append(withData(t.TempDir()), envStore+"="+url)...)
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	var tops [2]string
	for i, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("node %d: %v (waited %s at most), stderr %s", i, err, testkit.Deadline, r.stderr.String())
		}
		var rest string
		tops[i], rest = cutSession(t, r.stdout.String())
		if strings.TrimSpace(rest) != strings.TrimSpace(want) {
			t.Fatalf("node %d answered\n%s\nwant\n%s", i, rest, want)
		}
	}
	if tops[0] == tops[1] {
		t.Fatalf("both nodes ran session %s", tops[0])
	}
	listed := sessionLines(t, url)
	if len(listed) != 2 {
		t.Fatalf("sessions lists %q, want both nodes' sessions", listed)
	}
	for _, top := range tops {
		if tree := sessionLines(t, url, top); len(tree) != 1+len(folders) {
			t.Fatalf("sessions %s lists %d lines, want the session and its %d children:\n%s", top, len(tree), len(folders), strings.Join(tree, "\n"))
		}
	}
	// The session the first node ran, continued by a node that never
	// had it (another data directory): the log is the database's.
	stdout, stderr, code := nodeEnv(t, t.TempDir(), append(withData(t.TempDir()), envStore+"="+url), "run", "-continue", tops[0], "count", "again")
	if id, rest := cutSession(t, stdout); code != 0 || id != tops[0] || rest != "\n"+want+"\nnoted: count again\n" {
		t.Fatalf("continue on the other node: exit %d, session %s, answer\n%s\nstderr %s", code, id, rest, stderr)
	}
}
