package main

// The README's command blocks, run as a reader runs them: every ```sh
// block in order, in one bash, on the scripted model, with the ACP Go
// SDK's example agent as the README's "example" server and etcd for the
// etcd block. A block that needs what a test cannot have (an API key,
// the network, a model endpoint, a terminal) is marked in the README by
// a line `<!-- not run: why -->` just before it, and only those are
// skipped: their count is fixed here, so that none escapes unnoticed.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
)

// readmeNotRun is how many of the README's sh blocks are marked not run.
const readmeNotRun = 7

// goShim stands for the go command in the blocks: `go run ./cmd/node`
// and `go build -o OUT ./cmd/node` use the binary the tests built from
// this tree (a go run per line would build it again); anything else
// fails the block.
const goShim = `#!/bin/sh
case "$1 $2" in
"run ./cmd/node") shift 2; exec "$README_NODE" "$@" ;;
"build -o") [ "$4" = ./cmd/node ] && [ $# -eq 4 ] && exec cp "$README_NODE" "$3" ;;
esac
echo "README test: go $* is not run here" >&2
exit 127
`

var (
	shBlock = regexp.MustCompile("(?ms)^((?:<!-- not run: [^\n]*-->\n)?)```sh\n(.*?)^```$")
	notRun  = regexp.MustCompile(`^<!-- not run: \S.* -->\n$`)
)

type readmeBlock struct {
	line   int
	code   string
	notRun bool
}

// readmeBlocks are the README's sh blocks, in order.
func readmeBlocks(t *testing.T, md string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	for _, m := range shBlock.FindAllStringSubmatchIndex(md, -1) {
		marker := md[m[2]:m[3]]
		if marker != "" && !notRun.MatchString(marker) {
			t.Fatalf("README line %d: malformed marker %q", strings.Count(md[:m[0]], "\n")+1, marker)
		}
		blocks = append(blocks, readmeBlock{line: strings.Count(md[:m[4]], "\n") + 1, code: md[m[4]:m[5]], notRun: marker != ""})
	}
	return blocks
}

// jsonBlockWith returns the first ```json block of md holding every one
// of subs.
func jsonBlockWith(t *testing.T, md string, subs ...string) string {
	t.Helper()
	for _, part := range strings.Split(md, "```json\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(block, s)
		}
		if ok {
			return block
		}
	}
	t.Fatalf("README has no json block with %q", subs)
	return ""
}

// childFailed is what a block's output says when a child or a tool of it
// failed although the command exits 0: the scripted model answers a
// tool's error as its survey ("survey .: failed: list: ...") and a task
// or tool it lacks as "unknown task"/"unknown tool"; childEnded is a
// child's end, whose stop reason must be completed.
var (
	childFailed = regexp.MustCompile(`failed:|unknown (?:task|tool)`)
	childEnded  = regexp.MustCompile(`\] ended: (\S+)`)
)

// readmeOutputs splits the blocks' output at the lines the script echoes
// before each block: block number to what it printed.
func readmeOutputs(output string) map[int]string {
	outs := map[int]string{}
	marker := regexp.MustCompile(`(?m)^README test: block (\d+), line \d+$`)
	ms := marker.FindAllStringSubmatchIndex(output, -1)
	for i, m := range ms {
		end := len(output)
		if i+1 < len(ms) {
			end = ms[i+1][0]
		}
		var n int
		fmt.Sscan(output[m[2]:m[3]], &n)
		outs[n] = output[m[1]:end]
	}
	return outs
}

// Every runnable sh block of the README runs as written and exits 0
// (bash -e: every command of it), in the README's order, from a folder
// holding the README's agents.json; no block's output says that a child
// or its tool failed (a survey answering `failed: list: ...` exits 0),
// the steer example's child admits the steer, and the blocks marked not
// run are exactly readmeNotRun. Contract N1.
func TestReadmeCommandBlocksRun(t *testing.T) {
	example := acptest.ExampleAgent(t)
	etcd := etcdBinary(t)
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(md))
	script := "set -euo pipefail\n"
	skipped := 0
	for i, b := range blocks {
		if b.notRun {
			skipped++
			continue
		}
		script += fmt.Sprintf("echo 'README test: block %d, line %d' >&2\n%s", i+1, b.line, b.code)
	}
	if skipped != readmeNotRun {
		t.Fatalf("%d README blocks are marked not run, want %d: run the new one, or count it here", skipped, readmeNotRun)
	}
	if skipped == len(blocks) {
		t.Fatal("no README block runs")
	}

	work := writeTree(t) // what `run` surveys
	if err := os.WriteFile(filepath.Join(work, "agents.json"), []byte(jsonBlockWith(t, string(md), `"agent_servers"`, `"example"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir() // for ~/src/project
	if err := os.MkdirAll(filepath.Join(home, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(writeTree(t), filepath.Join(home, "src", "project")); err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(tools, "node")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}
	path := strings.Join([]string{tools, filepath.Dir(example), filepath.Dir(etcd), os.Getenv("PATH")}, string(os.PathListSeparator))

	out, err := os.Create(filepath.Join(t.TempDir(), "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Scale(5*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+home, envDataDir+"="+t.TempDir(), "README_NODE="+bin)
	// Files, not pipes: the blocks' background nodes outlive bash.
	cmd.Stdout, cmd.Stderr = out, out
	// Its own group, which the test ends with what the blocks left
	// running (serve, etcd).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	output, _ := os.ReadFile(out.Name())
	t.Logf("the README's blocks said:\n%s", output)
	if ctx.Err() != nil {
		err = fmt.Errorf("not done within %s", testkit.Scale(5*time.Minute))
	}
	if err != nil {
		t.Fatalf("the README's blocks: %v (the last block named in the log failed)", err)
	}
	outs := readmeOutputs(string(output))
	steered := false
	for i, b := range blocks {
		if b.notRun {
			continue
		}
		got, ok := outs[i+1]
		if !ok {
			t.Errorf("README block %d (line %d) printed no marker: it never ran", i+1, b.line)
			continue
		}
		if bad := childFailed.FindString(got); bad != "" {
			t.Errorf("README block %d (line %d) exits 0 but its output says %q: a child or its tool failed", i+1, b.line, bad)
		}
		for _, m := range childEnded.FindAllStringSubmatch(got, -1) {
			if m[1] != "completed" {
				t.Errorf("README block %d (line %d): a child %s", i+1, b.line, strings.TrimPrefix(m[0], "] "))
			}
		}
		if strings.Contains(b.code, " -steer ") {
			steered = true
			if !strings.Contains(got, "steer admitted: ") {
				t.Errorf("README block %d (line %d) steers a child, but its output has no `steer admitted`", i+1, b.line)
			}
		}
	}
	if !steered {
		t.Error("no README block steers a child (delegate -steer): the steer example is gone")
	}
}
