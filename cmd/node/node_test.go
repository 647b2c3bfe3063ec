package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/dustin/go-humanize/english"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/cmd/node/internal/crashhook"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// bin is the node binary as users get it, built once for every test;
// hooksBin is the same built with the subactortest tag, which links the
// crash test's hooks (package crashhook).
var bin, hooksBin string

// TestMain builds the binary and points every place the node could keep
// sessions at temporary directories, so that no test reaches the real home
// directory: node and cli default to a data directory of their own per test
// (see node), and HOME and XDG_DATA_HOME are temporary in case one does not.
//
// Re-executed with envFakeAgent set, the test binary is the fake ACP agent
// instead (fakeagent_test.go); with envPeakRSS, a launcher that measures
// a command's peak resident memory (damage_linux_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(envFakeAgent) != "" {
		os.Exit(runFakeAgent())
	}
	if os.Getenv(envTestPeer) != "" {
		os.Exit(runTestPeer())
	}
	if os.Getenv(envPeakRSS) != "" {
		os.Exit(runPeakRSS())
	}
	// A fuzz worker (go test -fuzz starts them with -test.fuzzworker) runs
	// only the fuzz target, which needs no binary; it inherits the
	// coordinator's temporary HOME, where a build would start from an
	// empty module cache.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		goleak.VerifyTestMain(m)
		return
	}
	dir, err := os.MkdirTemp("", "node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Built before HOME changes: the go command finds its caches there.
	bin, hooksBin = filepath.Join(dir, "node"), filepath.Join(dir, "node-with-hooks")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fail(fmt.Errorf("go build: %v\n%s", err, out))
	}
	if out, err := exec.Command("go", "build", "-tags", "subactortest", "-o", hooksBin, ".").CombinedOutput(); err != nil {
		fail(fmt.Errorf("go build -tags subactortest: %v\n%s", err, out))
	}
	for name, value := range map[string]string{
		"HOME":          filepath.Join(dir, "home"),
		"XDG_DATA_HOME": filepath.Join(dir, "xdg"),
		envDataDir:      filepath.Join(dir, "data"),
	} {
		if err := os.Setenv(name, value); err != nil {
			fail(err)
		}
	}
	// A developer's model configuration would take the runs off the
	// scripted model and onto the network.
	// A developer's OTEL_* variables would export the tests' traces.
	for _, name := range []string{crashhook.EnvAppendsFile, crashhook.EnvKillAfter, envBaseURL, envAPIKey, envModel, envDeepSeekKey,
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if err := os.Unsetenv(name); err != nil {
			fail(err)
		}
	}
	goleak.VerifyTestMain(m, testkit.DeadLetters, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// tree is the directory the tests survey: nested sub-folders, an empty one,
// a name with a space, and top-level files including an empty one and one
// without a final newline.
var tree = map[string]string{
	"README.txt":                "top level\nfile\n",
	"empty":                     "",
	"no-eol.txt":                "one\ntwo",
	"alpha/main.go":             "package main\n\nfunc main() {}\n",
	"alpha/notes.txt":           "héllo wörld\n",
	"alpha/nested/deeper/z.md":  "# z\n\nsome text\nmore\n",
	"alpha/nested/y.csv":        "a,b\n1,2\n3,4\n5,6",
	"beta/data.json":            "{\n  \"k\": [1, 2, 3]\n}\n",
	"beta/void/.keep":           "",
	"gamma/":                    "",
	"with space/one file.txt":   "x\n\n\ny\n",
	"with space/deep/a/b/c.txt": strings.Repeat("line\n", 100),
}

// writeTree creates tree under a temporary directory.
func writeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range tree {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type figures struct{ files, lines, bytes int }

func (f figures) String() string {
	return fmt.Sprintf("%s, %s, %s", english.Plural(f.files, "file", ""), english.Plural(f.lines, "line", ""), humanize.IBytes(uint64(f.bytes)))
}

// measure walks dir on its own, without the tools under test: a line is a
// newline, plus an unterminated last one.
func measure(t *testing.T, dir string, recurse bool) figures {
	t.Helper()
	var f figures
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != dir && !recurse:
			return filepath.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.files++
		f.bytes += len(b)
		f.lines += bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			f.lines++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// expected is the survey answer for root, surveyed under the name the user
// gave it (-dir, "." by default), computed from the files, and the paths of
// its sub-folders as the survey names them. The folder count is every
// folder of the tree, root and nested ones included.
func expected(t *testing.T, root, name string) (answer string, folders []string) {
	t.Helper()
	entries, err := os.ReadDir(root) // sorted by name, like the survey
	if err != nil {
		t.Fatal(err)
	}
	top := measure(t, root, false)
	total := top
	var lines []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		f := measure(t, filepath.Join(root, e.Name()), true)
		total.files, total.lines, total.bytes = total.files+f.files, total.lines+f.lines, total.bytes+f.bytes
		p := path.Join(name, e.Name())
		folders = append(folders, p)
		lines = append(lines, fmt.Sprintf("- %s: %s", p, f))
	}
	lines = append(lines, "- (top level): "+top.String())
	head := fmt.Sprintf("survey %s: %s in %s (%d delegated)", name, total, english.Plural(countFolders(t, root), "folder", ""), len(folders))
	return strings.Join(append([]string{head}, lines...), "\n"), folders
}

// countFolders counts the folders of the tree at root, root included.
func countFolders(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// node runs the binary in dir, with a data directory of its own, and
// returns its output and exit code.
func node(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return nodeEnv(t, dir, []string{envDataDir + "=" + t.TempDir()}, args...)
}

// nodeEnv runs the binary in dir with env added to the test's environment
// (a later entry wins) and returns its output and exit code.
func nodeEnv(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return nodeBin(t, bin, dir, env, args...)
}

// nodeDeadline bounds one whole node command: a command that starts a
// real npm agent (qwen-code: a Node.js start of 10 s and more on a loaded
// two-core machine) and runs turns through it takes a few of the waits
// testkit.Deadline bounds.
var nodeDeadline = 3 * testkit.Deadline

// nodeCtx is a context that ends after nodeDeadline, for a node command.
func nodeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), nodeDeadline)
	t.Cleanup(cancel)
	return ctx
}

// nodeBin is nodeEnv running binary.
func nodeBin(t *testing.T, binary, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx := nodeCtx(t)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("waited %s for node %v to exit", nodeDeadline, args)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("node %v: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

var sessionLine = regexp.MustCompile(`^session ([0-9a-f-]{36})\n`)

// cutSession takes the "session <id>" line off the start of a run's
// stdout and returns the id and the rest.
func cutSession(t *testing.T, stdout string) (id, rest string) {
	t.Helper()
	m := sessionLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("stdout does not start with the session id:\n%s", stdout)
	}
	return m[1], stdout[len(m[0]):]
}

// usageLineRe matches the usage totals line, the last of the progress on
// stderr.
var usageLineRe = regexp.MustCompile(`(?m)^usage: input=(\d+) output=(\d+) cached=(\d+)\n`)

// cutUsage takes the usage line off the end of a run's stderr and returns
// the progress lines before it and the totals. The scripted model reports
// usage: a line is always there.
func cutUsage(t *testing.T, stderr string) (progress string, u subagent.Usage) {
	t.Helper()
	all := usageLineRe.FindAllStringSubmatchIndex(stderr, -1)
	if len(all) != 1 || all[0][1] != len(stderr) {
		t.Fatalf("want one usage line, the last on stderr, found %d:\n%s", len(all), stderr)
	}
	m := all[0]
	for i, p := range []*int{&u.InputTokens, &u.OutputTokens, &u.CachedInputTokens} {
		*p, _ = strconv.Atoi(stderr[m[2+2*i]:m[3+2*i]])
	}
	return strings.TrimSuffix(stderr[:m[0]], "\n"), u
}

var (
	// A child is named by its short id and its task.
	startLine = regexp.MustCompile(`^child (\S{12}) \[([^\]]*)\] started$`)
	stepLine  = regexp.MustCompile(`^child (\S{12}) \[[^\]]*\] step (\d+) (\w+)(?: (.*))?$`)
	endLine   = regexp.MustCompile(`^child (\S{12}) \[[^\]]*\] ended: (\S+) in (\S+)$`)
	// The top agent's own steps, shown as a child's are.
	topLine  = regexp.MustCompile(`^top step (\d+) (\w+)(?: (.*))?$`)
	listArgs = regexp.MustCompile(`^list \{"path":"(.*)"\}$`)
)

// childLines is progress without the top agent's own lines.
func childLines(progress string) string {
	lines := strings.Split(progress, "\n")
	return strings.Join(slices.DeleteFunc(lines, topLine.MatchString), "\n")
}

// checkProgress checks that every sub-folder had one child that started,
// named by its task (tally <folder>), listed that folder first, took its steps in order and ended completed with
// an elapsed time, each child's lines in that order.
func checkProgress(t *testing.T, progress string, folders []string) {
	t.Helper()
	type child struct {
		folder, task   string
		step           int
		started, ended bool
	}
	children := map[string]*child{}
	var top []string
	for _, line := range strings.Split(progress, "\n") {
		if topLine.MatchString(line) {
			top = append(top, line)
			continue
		}
		if m := startLine.FindStringSubmatch(line); m != nil {
			if children[m[1]] != nil {
				t.Fatalf("child %s started twice", m[1])
			}
			children[m[1]] = &child{started: true, task: m[2]}
			continue
		}
		if m := stepLine.FindStringSubmatch(line); m != nil {
			c := children[m[1]]
			if c == nil || c.ended {
				t.Fatalf("step outside its child's start and end: %q", line)
			}
			var n int
			fmt.Sscan(m[2], &n)
			if n < c.step {
				t.Fatalf("step %d after step %d: %q", n, c.step, line)
			}
			c.step = n
			if l := listArgs.FindStringSubmatch(m[4]); l != nil && c.folder == "" {
				c.folder = l[1]
			}
			continue
		}
		if m := endLine.FindStringSubmatch(line); m != nil {
			c := children[m[1]]
			if c == nil || c.ended {
				t.Fatalf("end without a start, or twice: %q", line)
			}
			if m[2] != "completed" {
				t.Fatalf("child %s (%s) ended %s", m[1], c.folder, m[2])
			}
			if d, err := time.ParseDuration(m[3]); err != nil || d <= 0 {
				t.Fatalf("elapsed time %q: %v", m[3], err)
			}
			c.ended = true
			continue
		}
		t.Fatalf("unexpected progress line %q", line)
	}
	// The top agent lists the directory, delegates and answers.
	if len(top) < 3 || top[0] != "top step 1 model" || !strings.HasPrefix(top[len(top)-1], "top step ") || !strings.Contains(top[len(top)-1], " final survey ") {
		t.Fatalf("the top agent's steps %q, want its first model call to its final answer", top)
	}
	var surveyed []string
	for id, c := range children {
		if !c.ended {
			t.Fatalf("child %s (%s) never ended", id, c.folder)
		}
		if want := clip("tally "+c.folder, taskShown); c.task != want {
			t.Fatalf("child %s of %s is named [%s], want its task [%s]", id, c.folder, c.task, want)
		}
		surveyed = append(surveyed, c.folder)
	}
	slices.Sort(surveyed)
	if len(surveyed) < 2 || !slices.Equal(surveyed, folders) {
		t.Fatalf("children surveyed %q, want one per sub-folder %q", surveyed, folders)
	}
}

// Contract N1.
func TestN1_RunSurveysCurrentDirectoryWithProgress(t *testing.T) {
	root := writeTree(t)
	want, folders := expected(t, root, ".")
	stdout, stderr, code := node(t, root, "run")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// stdout: the session, a blank line and the answer; stderr: the
	// progress, then the usage.
	_, stdout = cutSession(t, stdout)
	progress, u := cutUsage(t, stderr)
	if u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Fatalf("usage %+v: the scripted model reports some", u)
	}
	if stdout != "\n"+want+"\n" {
		t.Fatalf("answer\n%s\nwant\n%s", stdout, want)
	}
	checkProgress(t, progress, folders)
}

// Contract N1: the survey names the directory as -dir gives it, relative
// or absolute, in its prompt, its children's paths and its answer, and
// counts every folder of the tree (this one nests four deep).
func TestN1_SurveyNamesTheDirectoryGivenAndCountsEveryFolder(t *testing.T) {
	root := writeTree(t)
	if n := countFolders(t, root); n != 11 {
		t.Fatalf("the tree has %d folders, want 11: the fixture changed", n)
	}
	parent, base := filepath.Split(root)
	for _, c := range []struct{ cwd, dir string }{
		{parent, base},
		{parent, "./" + base + "/"},
		{filepath.Join(root, "alpha"), ".."},
		{filepath.Join(root, "alpha", "nested"), "../../../" + base},
		{t.TempDir(), root},
	} {
		name := path.Clean(filepath.ToSlash(c.dir))
		want, folders := expected(t, root, name)
		stdout, stderr, code := node(t, c.cwd, "run", "-dir", c.dir)
		if code != 0 {
			t.Fatalf("-dir %s: exit %d, stderr: %s", c.dir, code, stderr)
		}
		_, stdout = cutSession(t, stdout)
		progress, _ := cutUsage(t, stderr)
		if stdout != "\n"+want+"\n" {
			t.Fatalf("-dir %s: exit %d, answer\n%s\nwant\n%s\nstderr: %s", c.dir, code, stdout, want, stderr)
		}
		checkProgress(t, progress, folders)
	}
}

// Contract N1.
func TestN1_QuietPrintsOnlyTheAnswer(t *testing.T) {
	root := writeTree(t)
	want, _ := expected(t, root, root)
	stdout, stderr, code := node(t, t.TempDir(), "run", "-quiet", "-dir", root)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	if _, stdout = cutSession(t, stdout); stdout != want+"\n" {
		t.Fatalf("exit %d, stdout\n%s\nwant\n%s\nstderr: %s", code, stdout, want, stderr)
	}
}

// Contract N1.
func TestN1_MaxDepthZeroSurveysWithoutChildren(t *testing.T) {
	root := writeTree(t)
	want, folders := expected(t, root, ".")
	want = strings.Replace(want, fmt.Sprintf("(%d delegated)", len(folders)), "(0 delegated)", 1)
	stdout, stderr, code := node(t, root, "run", "-max-depth", "0")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	_, stdout = cutSession(t, stdout)
	if progress, _ := cutUsage(t, stderr); childLines(progress) != "" || stdout != "\n"+want+"\n" {
		t.Fatalf("exit %d, stdout\n%s\nwant no child's progress and\n%s\nstderr: %s", code, stdout, want, stderr)
	}
}

// Contract N1.
func TestN1_UnreadableDirectoryFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	notDir := filepath.Join(writeTree(t), "README.txt")
	for _, dir := range []string{missing, notDir} {
		stdout, stderr, code := node(t, t.TempDir(), "run", "-dir", dir)
		if code != exitFailed || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("node run: cannot read directory %q", dir)) {
			t.Errorf("-dir %s: exit %d, stdout %q, stderr %q", dir, code, stdout, stderr)
		}
	}
}

// Contract N1.
func TestN1_UsageErrorsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "-max-depth", "many"}, `invalid value "many" for flag -max-depth`},
		{[]string{"run", "-max-depth", "-1"}, "-max-depth -1 must not be negative"},
		{[]string{"run", "extra"}, `unexpected argument "extra"`},
		{[]string{"run", "-continue", ""}, "-continue needs a session id"},
		{[]string{"run", "-continue", "x", "-dir", "."}, "-dir cannot be used with -continue"},
		{[]string{"sessions", "a", "b"}, `unexpected argument "b"`},
		{[]string{"sessions", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"sessions", "-data", memoryData}, "keeps no sessions past its own process"},
		{[]string{"frob"}, `unknown command "frob"`},
		{nil, "usage: node <command>"},
	} {
		stdout, stderr, code := node(t, t.TempDir(), c.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, stdout, stderr, c.msg)
		}
	}
}

// Contract N1.
func TestN1_HelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		stdout, stderr, code := node(t, t.TempDir(), args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "usage: node <command>") ||
			!strings.Contains(stdout, "run -continue SESSION") ||
			!strings.Contains(stdout, "sessions [-data DIR] [-json] [SESSION]") || !strings.Contains(stdout, envDataDir) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if stdout, stderr, code := node(t, t.TempDir(), "run", "-h"); code != 0 || stderr != "" || !strings.Contains(stdout, "-quiet") || !strings.Contains(stdout, "-max-depth") {
		t.Errorf("run -h: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, stderr, code := node(t, t.TempDir(), "sessions", "-h"); code != 0 || stderr != "" || !strings.Contains(stdout, "-data") {
		t.Errorf("sessions -h: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The in-process runs check, under the race detector, that the progress
// lines are serialized and that everything is disposed before cli returns.
// Contract N1.
func TestN1_InProcessRunDisposesEverything(t *testing.T) {
	root := writeTree(t)
	t.Setenv(envDataDir, t.TempDir())
	want, folders := expected(t, root, root)
	before := goleak.IgnoreCurrent()
	var stdout, stderr bytes.Buffer
	if code := cli(testkit.Ctx(t), []string{"run", "-dir", root}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if err := goleak.Find(before, testkit.DeadLetters); err != nil {
		t.Fatalf("cli left goroutines behind: %v", err)
	}
	_, out := cutSession(t, stdout.String())
	progress, _ := cutUsage(t, stderr.String())
	if out != "\n"+want+"\n" {
		t.Fatalf("answer\n%s\nwant\n%s", out, want)
	}
	checkProgress(t, progress, folders)
}

// cancelOnWrite cancels the run at its first progress line (a child's, on
// stderr), while the children are live.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("child ")) {
		w.cancel()
	}
	return w.Buffer.Write(p)
}

// Contract N1.
func TestN1_CancelledRunEndsAborted(t *testing.T) {
	root := writeTree(t)
	t.Setenv(envDataDir, t.TempDir())
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	stderr := &cancelOnWrite{cancel: cancel} // as SIGINT does through signal.NotifyContext
	var stdout bytes.Buffer
	code := cli(ctx, []string{"run", "-dir", root}, &stdout, stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "node run: the survey ended aborted: context canceled") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	started := len(regexp.MustCompile(`(?m)^child \S+ \[[^\]]*\] started$`).FindAllString(stderr.String(), -1))
	ended := len(regexp.MustCompile(`(?m)^child \S+ \[[^\]]*\] ended: `).FindAllString(stderr.String(), -1))
	// Whether a child was still working when the cancel reached it depends
	// on timing (S5 is tested deterministically in actors/); what the binary
	// owes is an end line for every child it started.
	if started == 0 || ended != started {
		t.Fatalf("%d children started, %d ended:\n%s", started, ended, stderr.String())
	}
}

// Contract N1: the survey skips version control folders (.git, .hg, .svn,
// .jj): their history is not the work. -vcs surveys them too.
func TestN1_RunSkipsVCSFoldersUnlessAsked(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"src/a.go", ".git/HEAD", ".jj/repo"} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "survey .: 1 file, 1 line, 2 B in 2 folders (1 delegated)\n- src: 1 file, 1 line, 2 B"},
		{[]string{"-vcs"}, "survey .: 3 files, 3 lines, 6 B in 4 folders (3 delegated)\n- .git: 1 file, 1 line, 2 B\n- .jj: 1 file, 1 line, 2 B\n- src: 1 file, 1 line, 2 B"},
	} {
		stdout, stderr, code := node(t, root, append([]string{"run", "-quiet"}, c.args...)...)
		if _, answer := cutSession(t, stdout); code != 0 || strings.TrimSpace(answer) != c.want {
			t.Errorf("run %q: exit %d, answer %q, want %q; stderr:\n%s", c.args, code, answer, c.want, stderr)
		}
	}
}
