package main

// Contract X1 with acpx (a headless ACP client) across its own sessions:
// a session made in one node process, prompts that session/load it in
// fresh ones, and acpx cancel.

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/subactor/subactor/internal/testkit"
)

// acpxBin is acpx's command; the test fails when CI=true and it is
// missing, and skips otherwise.
func acpxBin(t *testing.T) string {
	t.Helper()
	acpx, err := exec.LookPath("acpx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("acpx is not installed (npm install -g acpx@0.19.1)")
		}
		t.Skip("acpx is not installed (npm install -g acpx@0.19.1)")
	}
	return acpx
}

// nodesOn are the pids of the node processes whose command line names
// data (acpx starts them, and its queue owner keeps them while it lives).
func nodesOn(data string) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if args, err := p.CmdLine(); err == nil && len(args) > 1 && args[0] == bin && strings.Contains(strings.Join(args, " "), data) {
			out = append(out, p.PID)
		}
	}
	return out
}

// Contract X1 with a real client: acpx makes a session through node acp
// (one process, which exits), then a prompt in a fresh process loads it
// and delegates to two spawn children and one ACP child (the example
// agent), whose tool calls acpx shows, completed; a second session's
// prompt is cancelled mid-turn with acpx cancel (its children end); once acpx's
// queue owner has let the node go, a third prompt loads the session in a
// fresh process again, which continues it (the scripted model's answer
// notes the new prompt after the first one's totals, read from the
// loaded history; acpx does not print a load's replayed updates).
func TestX1_AcpxLoadsDelegatesCancelsAndLoadsAgain(t *testing.T) {
	acpx := acpxBin(t)
	dir, data, home := facesTree(t), t.TempDir(), t.TempDir()
	agentCmd := bin + " acp -data " + data + " -config " + exampleConfig(t)
	env := append(append(os.Environ(), "HOME="+home), modelEnv(surveyWithExample(t))...)
	t.Cleanup(func() {
		for _, pid := range nodesOn(data) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	acpxCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(testkit.Ctx(t), acpx, append([]string{"--agent", agentCmd, "--cwd", dir, "--format", "json", "--approve-all", "--ttl", "1"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := acpxCmd(args...).CombinedOutput()
		if err != nil {
			t.Fatalf("acpx %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("sessions", "new")
	first := run("prompt", "survey .")
	for _, want := range []string{`"method":"session/load"`, `"title":"spawn: tally a"`, `"title":"spawn: tally b"`, `"title":"example: improve the project"`, `"stopReason":"end_turn"`, `2 files`} {
		if !strings.Contains(first, want) {
			t.Errorf("acpx's first prompt shows no %s:\n%s", want, first)
		}
	}

	// A second session's prompt, cancelled while the example agent works
	// (the first session, continued, notes a prompt it has answered).
	run("sessions", "new", "--name", "second")
	second := acpxCmd("prompt", "-s", "second", "survey .")
	stdout, err := second.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	second.Stderr = second.Stdout
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var shown strings.Builder
	for line := ""; !strings.Contains(line, `"title":"example: improve the project"`); {
		var ok bool
		if line, ok = <-lines; !ok {
			t.Fatalf("acpx's second prompt ended before the example child ran:\n%s", shown.String())
		}
		shown.WriteString(line + "\n")
	}
	run("cancel", "-s", "second")
	for line := range lines {
		shown.WriteString(line + "\n")
	}
	_ = second.Wait()
	if !strings.Contains(shown.String(), `"stopReason":"cancelled"`) {
		t.Fatalf("the cancelled prompt did not end cancelled:\n%s", shown.String())
	}
	eventually(t, "no agent recorded running after the cancel", func() bool { return len(records(t, data)) == 0 })

	// acpx's queue owner lets the node go after its idle TTL (1 s); the
	// next prompt loads the session in a fresh process.
	eventually(t, "acpx to let its node acp process go", func() bool { return len(nodesOn(data)) == 0 })
	third := run("prompt", "and again")
	for _, want := range []string{`"method":"session/load"`, `survey .: 2 files`, `noted: and again`, `"stopReason":"end_turn"`} {
		if !strings.Contains(third, want) {
			t.Errorf("acpx's prompt in a fresh process shows no %s:\n%s", want, third)
		}
	}
}
