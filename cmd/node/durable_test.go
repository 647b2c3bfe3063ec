package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// withData is the environment entry that makes data the data directory.
func withData(data string) []string { return []string{envDataDir + "=" + data} }

// openData opens the store of the data directory data in the test process;
// it is closed when the test ends (no node can open it before then).
func openData(t *testing.T, data string) persistence.Backend {
	t.Helper()
	b, err := persistence.OpenBolt(filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// logOf reads a session's log from the data directory data, closing the
// store again so that a node can open it.
func logOf(t *testing.T, data, id string) []persistence.Entry {
	t.Helper()
	b, err := persistence.OpenBolt(filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, entries, err := b.LoadFrom(testkit.Ctx(t), id, 0)
	if err != nil {
		t.Fatalf("load session %s: %v", id, err)
	}
	return entries
}

// messages decodes the model-visible turns of a log.
func messages(t *testing.T, entries []persistence.Entry) []agent.Message {
	t.Helper()
	var out []agent.Message
	for _, e := range entries {
		if e.Kind != persistence.KindMessage {
			continue
		}
		var m agent.Message
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatalf("record %d: %v", e.Seq, err)
		}
		out = append(out, m)
	}
	return out
}

// listedLine is one line of node sessions.
type listedLine struct {
	depth                int
	id                   string
	turns                int
	state                string
	server, agentSession string // an ACP child's
	prompt               string
}

var listedRE = regexp.MustCompile(`^((?:  )*)(\S+) turns=(\d+) state=(\S+)(?: server=(\S+) agent-session=(\S+))? prompt=(".*")$`)

// parseListing parses node sessions' stdout.
func parseListing(t *testing.T, stdout string) []listedLine {
	t.Helper()
	var out []listedLine
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		m := listedRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unexpected sessions line %q in\n%s", line, stdout)
		}
		turns, _ := strconv.Atoi(m[3])
		prompt, err := strconv.Unquote(m[7])
		if err != nil {
			t.Fatalf("prompt of %q: %v", line, err)
		}
		out = append(out, listedLine{depth: len(m[1]) / 2, id: m[2], turns: turns, state: m[4], server: m[5], agentSession: m[6], prompt: prompt})
	}
	return out
}

// Contract N1: with no -data and no SUBACTOR_DATA_DIR, sessions go to
// $XDG_DATA_HOME/subactor, else ~/.local/share/subactor (a relative
// $XDG_DATA_HOME is ignored, as the XDG spec says), created 0700 on a
// machine that has none; SUBACTOR_DATA_DIR beats both, and -data beats it.
func TestN1_DataDirectoryFollowsXDGAndCanBeOverridden(t *testing.T) {
	root := writeTree(t)
	home, xdg := t.TempDir(), t.TempDir()
	// Missing, like every data directory here: the node makes them.
	env, flagDir := filepath.Join(t.TempDir(), "env"), filepath.Join(t.TempDir(), "flag")
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // the data directory
	}{
		{"XDG_DATA_HOME", []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg, envDataDir + "="}, nil, filepath.Join(xdg, appName)},
		{"home", []string{"HOME=" + home, "XDG_DATA_HOME=", envDataDir + "="}, nil, filepath.Join(home, ".local", "share", appName)},
		{"relative XDG_DATA_HOME", []string{"HOME=" + home, "XDG_DATA_HOME=rel", envDataDir + "="}, nil, filepath.Join(home, ".local", "share", appName)},
		{"env", []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg, envDataDir + "=" + env}, nil, env},
		{"flag", []string{"HOME=" + home, "XDG_DATA_HOME=" + xdg, envDataDir + "=" + env}, []string{"-data", flagDir}, flagDir},
	} {
		stdout, stderr, code := nodeEnv(t, root, c.env, slices.Concat([]string{"run", "-quiet"}, c.args)...)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %s", c.name, code, stderr)
		}
		id, _ := cutSession(t, stdout)
		fi, err := os.Stat(filepath.Join(c.want, storeFile))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: no store in %s: %v", c.name, c.want, err)
		}
		if di, err := os.Stat(c.want); err != nil || di.Mode().Perm() != 0o700 {
			t.Fatalf("%s: data directory %s: %v, want mode 0700", c.name, c.want, err)
		}
		// node sessions finds it the same way.
		stdout, stderr, code = nodeEnv(t, root, c.env, slices.Concat([]string{"sessions"}, c.args)...)
		if code != 0 || !slices.ContainsFunc(parseListing(t, stdout), func(l listedLine) bool { return l.id == id }) {
			t.Fatalf("%s: sessions: exit %d, stdout %q, stderr %q; want %s listed", c.name, code, stdout, stderr, id)
		}
	}
	// The real home was never used: HOME pointed at temporary directories.
	if _, err := os.Stat(filepath.Join(home, ".local", "share", appName, storeFile)); err != nil {
		t.Fatal(err)
	}
}

// Contract N1: -data :memory: keeps sessions in memory: nothing is
// written to any data directory.
func TestN1_MemoryDataWritesNoFile(t *testing.T) {
	root := writeTree(t)
	want, _ := expected(t, root, ".")
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet", "-data", memoryData)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if _, rest := cutSession(t, stdout); rest != want+"\n" {
		t.Fatalf("answer\n%s\nwant\n%s", rest, want)
	}
	stdout, stderr, code = nodeEnv(t, root, withData(memoryData), "run", "-quiet")
	if code != 0 || !strings.HasSuffix(stdout, want+"\n") {
		t.Fatalf("%s=%s: exit %d, stdout %q, stderr %q", envDataDir, memoryData, code, stdout, stderr)
	}
	if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
		t.Fatalf("data directory holds %v (%v), want nothing", entries, err)
	}
}

// Contract N1: a data directory that cannot be made or used is an error
// naming it, exit 1, and the survey never starts. The paths sit under a
// regular file, which even root cannot make a directory of; a read-only
// directory is tried too where permissions apply.
func TestN1_UnusableDataDirectoryFails(t *testing.T) {
	root := writeTree(t)
	file := filepath.Join(root, "README.txt")
	dirs := []string{filepath.Join(file, "data"), file}
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.Join(ro, "data"))
	}
	for _, dir := range dirs {
		for _, c := range []struct {
			env  []string
			args []string
		}{
			{withData(t.TempDir()), []string{"run", "-data", dir}},
			{withData(dir), []string{"run"}},
			{withData(dir), []string{"run", "-continue", "some-session"}},
			{withData(dir), []string{"sessions"}},
		} {
			stdout, stderr, code := nodeEnv(t, root, c.env, c.args...)
			if code != exitFailed || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("data directory %q", dir)) {
				t.Errorf("%v with %v: exit %d, stdout %q, stderr %q; want exit 1 naming %s", c.args, c.env, code, stdout, stderr, dir)
			}
		}
	}
}

// Contract N1: one node at a time uses a data directory (bbolt locks its
// file). A second one fails within a couple of seconds with an error that
// names the directory and says why, instead of hanging; run and sessions
// alike. The test process holds the file as a live node would.
func TestN1_SecondNodeOnADataDirectoryFailsFast(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	held := openData(t, data)
	for _, args := range [][]string{{"run"}, {"sessions"}, {"run", "-continue", "some-session"}} {
		began := time.Now()
		stdout, stderr, code := nodeEnv(t, root, withData(data), args...)
		took := time.Since(began)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("data directory %q: it is in use by another node process", data)) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
		// Failing fast is seconds; hanging is forever. The scaled
		// deadline tells them apart on a loaded machine too.
		if took > testkit.Deadline/2 {
			t.Errorf("%v took %s to give up on the lock", args, took)
		}
	}
	// Released, the directory serves the next node.
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet"); code != 0 {
		t.Fatalf("after release: exit %d, stderr %s", code, stderr)
	}
}

// Contract S6 (the node's part): a run's sessions are on disk: node
// sessions lists the top-level session completed, with as many turns as
// its log has message records, and, given its id, the session and its
// children indented below it, one per sub-folder, each completed on its
// own tally. Listing only reads: nothing is created where no store exists.
func TestS6_SessionsListsTopLevelSessionAndItsChildren(t *testing.T) {
	root := writeTree(t)
	_, folders := expected(t, root, ".")
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	top, _ := cutSession(t, stdout)
	// A second top-level session, listed after the first.
	stdout, _, _ = nodeEnv(t, root, withData(data), "run", "-quiet", "-max-depth", "0")
	second, _ := cutSession(t, stdout)

	stdout, stderr, code = nodeEnv(t, root, withData(data), "sessions")
	if code != 0 || stderr != "" {
		t.Fatalf("sessions: exit %d, stderr %s", code, stderr)
	}
	lines := parseListing(t, stdout)
	turns := len(messages(t, logOf(t, data, top)))
	want := []listedLine{
		{id: top, turns: turns, state: "completed", prompt: "survey ."},
		{id: second, turns: len(messages(t, logOf(t, data, second))), state: "completed", prompt: "survey ."},
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("sessions lists\n%+v\nwant\n%+v", lines, want)
	}

	stdout, stderr, code = nodeEnv(t, root, withData(data), "sessions", top)
	if code != 0 || stderr != "" {
		t.Fatalf("sessions %s: exit %d, stderr %s", top, code, stderr)
	}
	lines = parseListing(t, stdout)
	if len(lines) == 0 || lines[0] != want[0] {
		t.Fatalf("sessions %s starts with %+v, want %+v", top, lines, want[0])
	}
	var tallied []string
	for _, l := range lines[1:] {
		if l.depth != 1 || l.state != "completed" || l.turns != len(messages(t, logOf(t, data, l.id))) {
			t.Fatalf("child line %+v: want depth 1, completed, its log's turns", l)
		}
		tallied = append(tallied, strings.TrimPrefix(l.prompt, "tally "))
	}
	slices.Sort(tallied)
	if !slices.Equal(tallied, folders) {
		t.Fatalf("children tally %q, want one per sub-folder %q", tallied, folders)
	}

	// A data directory with no store lists nothing and stays empty.
	empty := filepath.Join(t.TempDir(), "none")
	if stdout, stderr, code := nodeEnv(t, root, withData(empty), "sessions"); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("sessions on %s: exit %d, stdout %q, stderr %q", empty, code, stdout, stderr)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("sessions created %s: %v", empty, err)
	}
}

// Contract S6 (the node's part): run -continue loads the top-level agent
// from its log and runs it again in the same session: the log keeps its
// records and grows, and what the model answers shows it read the earlier
// turns (the scripted model takes its task from the first prompt, reuses
// the tallies already in the history, so no child starts, and notes the
// new prompt). Without a prompt the session goes on as it stopped. It
// works from any working directory: the session recorded which directory
// it surveys.
func TestS6_ContinueAddsTurnsToTheSameSession(t *testing.T) {
	root := writeTree(t)
	want, _ := expected(t, root, ".")
	data := t.TempDir()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	top, _ := cutSession(t, stdout)
	before := logOf(t, data, top)

	stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), "run", "-continue", top, "count", "again")
	if code != 0 {
		t.Fatalf("continue: exit %d, stderr %s", code, stderr)
	}
	id, rest := cutSession(t, stdout)
	if id != top {
		t.Fatalf("continued session %s, want %s", id, top)
	}
	// No child's progress: every tally was in the history already.
	if progress, _ := cutUsage(t, stderr); childLines(progress) != "" || rest != "\n"+want+"\nnoted: count again\n" {
		t.Fatalf("continued answer\n%s\nwant\n%s\nnoted: count again", rest, want)
	}
	after := logOf(t, data, top)
	checkPrefix(t, before, after)
	added := messages(t, after[len(before):])
	if len(added) != 2 || added[0].Role != agent.User || subagent.TextOf(added[0].Content) != "count again" || added[1].Role != agent.Assistant {
		t.Fatalf("continuing added %+v, want the prompt and the answer", added)
	}

	// In-process, without a prompt: the session is complete, so nothing
	// runs and nothing is appended (issue 17), and nothing is left
	// running once cli returns.
	t.Setenv(envDataDir, data)
	leaks := goleak.IgnoreCurrent()
	var out, errOut bytes.Buffer
	if code := cli(testkit.Ctx(t), []string{"run", "-continue", top}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "the session is complete") || out.Len() != 0 {
		t.Fatalf("continue without a prompt: exit %d, stdout %q, stderr %s", code, out.String(), errOut.String())
	}
	if err := goleak.Find(leaks, testkit.DeadLetters); err != nil {
		t.Fatalf("cli left goroutines behind: %v", err)
	}
	final := logOf(t, data, top)
	if len(final) != len(after) {
		t.Fatalf("continuing a complete session without a prompt appended %d records", len(final)-len(after))
	}
	stdout, _, _ = nodeEnv(t, root, withData(data), "sessions")
	if lines := parseListing(t, stdout); len(lines) != 1 || lines[0].turns != len(messages(t, final)) || lines[0].state != "completed" {
		t.Fatalf("sessions after continuing: %+v", lines)
	}
}

// checkPrefix fails unless after begins with before, record for record,
// and has more.
func checkPrefix(t *testing.T, before, after []persistence.Entry) {
	t.Helper()
	if len(after) <= len(before) {
		t.Fatalf("the log has %d records, had %d: it did not grow", len(after), len(before))
	}
	for i, e := range before {
		a := after[i]
		if a.Seq != e.Seq || a.Kind != e.Kind || !bytes.Equal(a.Data, e.Data) {
			t.Fatalf("record %d changed: %s %s, was %s %s", e.Seq, a.Kind, a.Data, e.Kind, e.Data)
		}
	}
}

// surveyWithAChild runs the survey of root on data and returns its
// session, its first child and the data directory's store, open.
func surveyWithAChild(t *testing.T, root, data string) (top, child string, b persistence.Backend) {
	t.Helper()
	stdout, stderr, code := nodeEnv(t, root, withData(data), "run", "-quiet")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %s", code, stderr)
	}
	top, _ = cutSession(t, stdout)
	b = openData(t, data)
	children, err := b.Children(testkit.Ctx(t), top)
	if err != nil || len(children) == 0 {
		t.Fatalf("children of %s: %v, %v", top, children, err)
	}
	return top, children[0].Header.SessionID, b
}

// Contract S6 (the node's part): continuing a session that does not exist,
// or one that is not a top-level node run, is an error naming it, exit 1;
// so is listing an unknown session.
func TestS6_ContinueUnknownOrChildSessionFails(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	top, child, b := surveyWithAChild(t, root, data)
	b.Close()

	missing := filepath.Join(t.TempDir(), "missing") // a data directory with no store
	for _, c := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{withData(data), []string{"run", "-continue", "no-such-session"}, fmt.Sprintf("node run: -continue no-such-session: data directory %q: no such session", data)},
		{withData(missing), []string{"run", "-continue", top}, fmt.Sprintf("node run: -continue %s: data directory %q: no such session", top, missing)},
		{withData(data), []string{"run", "-continue", child}, fmt.Sprintf("not a top-level session: it is a child of %s", top)},
		{withData(data), []string{"sessions", "no-such-session"}, fmt.Sprintf(`node sessions: no such session "no-such-session" in data directory %q`, data)},
	} {
		stdout, stderr, code := nodeEnv(t, root, c.env, c.args...)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, stdout, stderr, c.msg)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("-continue created %s: %v", missing, err)
	}
}

// Contract S6 (issue 17): the messages that point elsewhere name a command
// that works. run -continue on a grandchild of a node run (a child that a
// child delegated, as a configured model does below -max-depth 1) names
// the top-level session and run -continue on it, not its parent, which is
// no top-level session either; the command it names then works.
func TestS6_ContinueOfAGrandchildNamesItsTopLevelSession(t *testing.T) {
	root := writeTree(t)
	data := t.TempDir()
	top, child, b := surveyWithAChild(t, root, data)
	const grandchild = "grandchild-of-the-survey"
	if err := b.Create(testkit.Ctx(t), subagent.SessionHeader{SessionID: grandchild, ParentSessionID: child}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	hint := "run -continue " + top
	_, stderr, code := nodeEnv(t, root, withData(data), "run", "-continue", grandchild)
	if code != exitFailed || !strings.Contains(stderr, "not a top-level session: it is a child of "+child) || !strings.Contains(stderr, hint) {
		t.Fatalf("run -continue of a grandchild: exit %d, stderr %q; want exit 1 naming %q", code, stderr, hint)
	}
	if _, stderr, code := nodeEnv(t, root, withData(data), "run", "-continue", top); code != 0 {
		t.Fatalf("the command the message names: exit %d, stderr %q", code, stderr)
	}
}
