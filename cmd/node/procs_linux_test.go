package main

// What a node that is stopped or killed leaves of its agents (contracts
// R3, N1): the stubborn fake agent with a family (fakeagent_test.go)
// ignores SIGTERM and the end of its input, and its sleepers ignore
// SIGTERM, so only the node's ladder, KillAgents and the journal end them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/subactor/subactor/internal/agentproc"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/testkit"
)

// procID names a process across pid reuse: its pid and start time.
type procID struct {
	pid   int
	start uint64
}

// running reports whether the process still runs: it exists with the
// same start time and is no zombie.
func (p procID) running() bool {
	proc, err := procfs.NewProc(p.pid)
	if err != nil {
		return false
	}
	st, err := proc.Stat()
	return err == nil && st.Starttime == p.start && st.State != "Z" && st.State != "X"
}

// family is a stubborn agent's processes: the leader, a member of its
// group, a runaway that left the group (setsid) keeping the agent's tag
// in its environment, and a clean one that left the group and cleared its
// environment.
type family struct {
	leader, member, runaway, clean procID
}

func (f family) all() map[string]procID {
	return map[string]procID{"leader": f.leader, "member": f.member, "runaway": f.runaway, "clean": f.clean}
}

// eventually polls cond until it holds, failing the test naming what it
// waited for at the deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testkit.Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", testkit.Deadline, what)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: nothing tells us
	}
}

// stubborn is a running `node delegate wait` on the stubborn agent.
type stubborn struct {
	cmd    *exec.Cmd
	output *bytes.Buffer // stdout and stderr
	fam    family
	dir    string // the family directory
}

// stubbornNode starts `node delegate wait` on the stubborn agent with its
// family, on data, and returns it once the family runs. Whatever of the
// family is left when the test ends is killed.
func stubbornNode(t *testing.T, data string) *stubborn {
	t.Helper()
	dir := t.TempDir()
	return startStubborn(t, data, dir, stubbornConfig(t, dir, ""), "delegate", "-config", "CONFIG", "wait")
}

// stubbornConfig is a -config file whose one server, "stubborn", is the
// stubborn agent with its family in the directory dir, keeping its
// sessions in history (when not "") so that it can load them.
func stubbornConfig(t *testing.T, dir, history string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envFakeAgent: "1", envFakeFamily: dir, "GORACE": "atexit_sleep_ms=0"}
	if history != "" {
		env[envFakeAgentHistory] = history
	}
	entry, err := json.Marshal(map[string]any{"command": exe, "env": env})
	if err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, `{"agent_servers": {"stubborn": `+string(entry)+`}}`)
}

// startStubborn starts the node with args (CONFIG among them stands for
// config), on data, and returns it once the stubborn agent with its
// family in the directory dir has begun a "wait" turn.
func startStubborn(t *testing.T, data, dir, config string, args ...string) *stubborn {
	t.Helper()
	s := &stubborn{output: new(bytes.Buffer), dir: dir}
	args = slices.Replace(slices.Clone(args), slices.Index(args, "CONFIG"), slices.Index(args, "CONFIG")+1, config)
	s.cmd = exec.CommandContext(testkit.Ctx(t), bin, args...)
	s.cmd.Env = append(os.Environ(), withData(data)...)
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's turn to begin", func() bool {
		_, err := os.Stat(filepath.Join(s.dir, familyWaiting))
		return err == nil
	})
	s.fam = familyOf(t, dir)
	t.Cleanup(func() {
		for _, p := range s.fam.all() {
			if p.running() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	return s
}

// familyOf reads the pids of the family a stubborn agent with its family
// in dir wrote last; one that has ended already gets start time 0, which
// never runs.
func familyOf(t *testing.T, dir string) family {
	t.Helper()
	pids, err := os.ReadFile(filepath.Join(dir, familyPids))
	if err != nil {
		t.Fatal(err)
	}
	var ids []procID
	for _, f := range strings.Fields(string(pids)) {
		pid, _ := strconv.Atoi(f)
		id := procID{pid: pid}
		if p, err := procfs.NewProc(pid); err == nil {
			if st, err := p.Stat(); err == nil {
				id.start = st.Starttime
			}
		}
		ids = append(ids, id)
	}
	if len(ids) != 4 {
		t.Fatalf("family file %q", pids)
	}
	return family{leader: ids[0], member: ids[1], runaway: ids[2], clean: ids[3]}
}

// signal sends sig to the node.
func (s *stubborn) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// cancelled waits until the agent's turn has been cancelled: the node has
// taken the first signal and its graceful stop is under way.
func (s *stubborn) cancelled(t *testing.T) {
	t.Helper()
	eventually(t, "the agent's turn to be cancelled", func() bool {
		_, err := os.Stat(filepath.Join(s.dir, familyCancelled))
		return err == nil
	})
}

// wait waits for the node to exit and returns how it ended.
func (s *stubborn) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	_ = s.cmd.Wait() // the status says how it ended
	if s.cmd.ProcessState == nil {
		t.Fatal("the node did not run")
	}
	return s.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// running are the family's processes that still run, by name.
func (f family) running() []string {
	var names []string
	for name, p := range f.all() {
		if p.running() {
			names = append(names, name)
		}
	}
	return names
}

// waitGone waits until none of the named processes of the family runs.
func (f family) waitGone(t *testing.T, what string, names ...string) {
	t.Helper()
	eventually(t, what, func() bool {
		for _, n := range names {
			if f.all()[n].running() {
				return false
			}
		}
		return true
	})
}

// records are the journal's records in the data directory.
func records(t *testing.T, data string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(data, journalDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

var everyone = []string{"leader", "member", "runaway", "clean"}

// Contracts R3, N1: a second Ctrl-C or SIGTERM while the node stops its
// agent gracefully ends the node at once, by that signal, but only after
// SIGKILL went to the agent's group and to what it left outside it (the
// runaway by its tag, the clean one adopted by the node): nothing of the
// agent runs afterwards.
func TestR3_SecondSignalKillsTheAgentsBeforeTheNodeEnds(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			s := stubbornNode(t, t.TempDir())
			s.signal(t, sig)
			s.cancelled(t)
			// The ladder waits StopWait on each rung the agent ignores:
			// it is still under way.
			if r := s.fam.running(); len(r) != 4 {
				t.Logf("running when the second signal went: %v", r)
			}
			s.signal(t, sig)
			if ws := s.wait(t); !ws.Signaled() || ws.Signal() != sig {
				t.Fatalf("the node ended %v, want by %v; output:\n%s", s.cmd.ProcessState, sig, s.output)
			}
			s.fam.waitGone(t, "the agent's processes to end", everyone...)
		})
	}
}

// Contracts R3, N1: SIGHUP (a closed terminal) stops the node as Ctrl-C
// does: the child is cancelled and disposed, its agent stopped on the
// ladder with everything it started, and the node exits 129 (128 +
// SIGHUP: the child ended aborted), its journal empty.
func TestR3_HangupStopsTheNodeGracefully(t *testing.T) {
	data := t.TempDir()
	s := stubbornNode(t, data)
	s.signal(t, syscall.SIGHUP)
	ws := s.wait(t)
	if ws.Signaled() || ws.ExitStatus() != 128+int(syscall.SIGHUP) || !strings.Contains(s.output.String(), "the child ended aborted") {
		t.Fatalf("the node ended %v, want exit %d; output:\n%s", s.cmd.ProcessState, 128+int(syscall.SIGHUP), s.output)
	}
	if r := s.fam.running(); len(r) > 0 {
		t.Fatalf("still running after the node ended: %v", r)
	}
	if r := records(t, data); len(r) > 0 {
		t.Fatalf("journal records left: %v", r)
	}
}

// Contracts R3, N1: a node killed with SIGKILL takes its agent with it
// (the parent-death signal), and the next node on the same data directory
// ends what the agent started, in its group or not, found by its tag; it
// says so on stderr. A process that left the group and cleared its
// environment cannot be found (documented) and is ended by the test.
func TestR3_KilledNodeLeavesNothingAfterTheNextStart(t *testing.T) {
	data := t.TempDir()
	s := stubbornNode(t, data)
	if r := records(t, data); len(r) != 1 {
		t.Fatalf("journal records while the agent runs: %v, want one", r)
	}
	s.signal(t, syscall.SIGKILL)
	if ws := s.wait(t); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the node ended %v", s.cmd.ProcessState)
	}
	s.fam.waitGone(t, "the agent to die with its node", "leader")
	if r := s.fam.running(); len(r) != 3 {
		t.Fatalf("running after the node's death: %v; want member, runaway and clean, which nothing ended yet", r)
	}
	_, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "run", "-quiet", "-max-depth", "0", "-dir", t.TempDir())
	if code != exitOK || !strings.Contains(stderr, "ended the processes that agents of an earlier node left running") {
		t.Fatalf("next node: exit %d, stderr %s", code, stderr)
	}
	s.fam.waitGone(t, "the next node to end what the agent left", "member", "runaway")
	if r := records(t, data); len(r) > 0 {
		t.Fatalf("journal records left: %v", r)
	}
	if s.fam.clean.running() {
		t.Log("the clean runaway survives, as documented")
	}
}

// Contract K3: the node is non-dumpable, so its agent, a process of the
// same user, cannot read its environment, where its API keys are. Run as
// root, the node is started without the capabilities with which root
// reads any process (see envExecUnprivileged).
func TestK3_AgentCannotReadTheNodesEnvironment(t *testing.T) {
	const secret = "NODETEST_SECRET_VALUE_41"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testkit.Ctx(t), bin, "delegate", "-quiet", "-config", fakeConfig(t), "environ")
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(testkit.Ctx(t), exe, cmd.Args[1:]...)
		cmd.Env = append(cmd.Env, envExecUnprivileged+"="+bin)
	}
	cmd.Env = append(append(os.Environ(), cmd.Env...), envDataDir+"="+t.TempDir(), "NODETEST_SECRET="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "environ: open /proc/") || !strings.Contains(string(out), "permission denied") || strings.Contains(string(out), secret) {
		t.Fatalf("the agent read the node's environment: %s", out)
	}
}

// Contract K4: every command that starts an agent records it and first
// ends what a killed node left, follow-ups too. A node killed (SIGKILL)
// in the middle of a follow-up's turn (delegate -continue, send) leaves
// its agent's grandchildren running, in the agent's group and outside it
// with its tag (as codex-acp's native binary is); the next follow-up ends
// them, completes with the child's history whole, and leaves nothing of
// its own agent nor a journal record.
func TestK4_AFollowUpEndsWhatAKilledFollowUpLeft(t *testing.T) {
	for _, how := range []string{"delegate -continue", "send"} {
		t.Run(how, func(t *testing.T) {
			data, dir := t.TempDir(), t.TempDir()
			config := stubbornConfig(t, dir, t.TempDir())
			stdout, stderr, code := nodeEnv(t, t.TempDir(), withData(data), "delegate", "-quiet", "-config", config, "first")
			if code != exitOK {
				t.Fatalf("delegate: exit %d, %s", code, stderr)
			}
			session, _ := cutSession(t, stdout)
			followUp := []string{"delegate", "-config", "CONFIG", "-continue", session}
			if how == "send" {
				out, _, _ := nodeEnv(t, t.TempDir(), withData(data), "sessions", session)
				kids := parseListing(t, out)
				if len(kids) != 2 {
					t.Fatalf("sessions %s lists %+v", session, kids)
				}
				followUp = []string{"send", "-config", "CONFIG", session, kids[1].id}
			}

			s := startStubborn(t, data, dir, config, append(followUp, "wait")...)
			if r := records(t, data); len(r) != 1 {
				t.Fatalf("journal records while the follow-up's agent runs: %v, want one", r)
			}
			s.signal(t, syscall.SIGKILL)
			_ = s.wait(t)
			s.fam.waitGone(t, "the agent to die with its node", "leader")
			if r := s.fam.running(); !slices.Contains(r, "member") || !slices.Contains(r, "runaway") {
				t.Fatalf("running after the node's death: %v; want the member and the runaway", r)
			}

			args := slices.Clone(followUp)
			args[slices.Index(args, "CONFIG")] = config
			stdout, stderr, code = nodeEnv(t, t.TempDir(), withData(data), append(args, "again")...)
			if code != exitOK || !strings.HasSuffix(stdout, "echo: again (earlier: first, wait)\n") ||
				!strings.Contains(stderr, "ended the processes that agents of an earlier node left running") {
				t.Fatalf("next %s: exit %d\nstdout:\n%s\nstderr:\n%s", how, code, stdout, stderr)
			}
			s.fam.waitGone(t, "the next follow-up to end what the killed one left", "member", "runaway")
			next := familyOf(t, dir)
			if next == s.fam {
				t.Fatal("the next follow-up's agent wrote no family")
			}
			if r := next.running(); len(r) > 0 {
				t.Fatalf("the next follow-up left its agent's %v running", r)
			}
			if r := records(t, data); len(r) > 0 {
				t.Fatalf("journal records left: %v", r)
			}
		})
	}
}

// Contract K4: records forged in the data directory harm nothing. They
// name, with their real start times, an unrelated process, the leader of
// a process group with a member, and the node's own parent (a shell that
// carries the forged tag, as the node itself then does); the user's own
// files sit beside them (notes.json, mine.json.tmp), and what would block
// or exhaust a reader, each under a name like a record's and under a
// record's very name (a tag and .json, which the journal reads): a FIFO,
// a symlink to /dev/zero, a non-empty directory and a 100 MB regular
// file. Ten runs each complete with exit 0, each such file costs one
// warning on stderr (naming it once), every process still runs and every
// file of the user is there. The one exception is the 100 MB file under a
// record's name, which the journal takes for its own unreadable record
// (over its read bound): one warning, then removed; it is put back for
// each run.
func TestK4_ForgedRecordsHarmNothingAndTheUsersFilesSurvive(t *testing.T) {
	data := t.TempDir()
	agents := filepath.Join(data, journalDir)
	if err := os.MkdirAll(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	sleeper := func(pgid int) procID {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return procOf(t, cmd.Process.Pid)
	}
	unrelated, leader := sleeper(0), sleeper(0)
	member := sleeper(leader.pid)

	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	forge := func(tag string, leader procID) {
		rec, err := json.Marshal(map[string]any{
			"tag": tag, "boot": strings.TrimSpace(string(boot)),
			"node":   map[string]any{"pid": os.Getpid(), "start": 1}, // gone: another start time
			"leader": map[string]any{"pid": leader.pid, "start": leader.start},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(agents, tag+".json"), rec, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	forge(ids.New(), unrelated)
	forge(ids.New(), leader)
	parentTag := ids.New()
	// big writes a 100 MB regular file (sparse: its size, not its blocks,
	// is what a read without bound would pull in).
	big := func(name string) error {
		f, err := os.Create(filepath.Join(agents, name))
		if err != nil {
			return err
		}
		return errors.Join(f.Truncate(100<<20), f.Close())
	}
	mine := []string{"notes.json", "mine.json.tmp"} // left alone with a warning each
	for _, name := range mine {
		if err := os.WriteFile(filepath.Join(agents, name), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, names := range [][2]string{{"x.json", ids.New() + ".json"}, {"zero.json", ids.New() + ".json"}, {"sub.json", ids.New() + ".json"}, {"big.json", ""}} {
		for _, name := range names {
			if name == "" {
				continue
			}
			path := filepath.Join(agents, name)
			var err error
			switch names[0] {
			case "x.json":
				err = syscall.Mkfifo(path, 0o600)
			case "zero.json":
				err = os.Symlink("/dev/zero", path)
			case "sub.json":
				err = os.MkdirAll(filepath.Join(path, "inside"), 0o700)
			case "big.json":
				err = big(name)
			}
			if err != nil {
				t.Fatal(err)
			}
			mine = append(mine, name)
		}
	}
	bigRecord := ids.New() + ".json" // the journal's own name: read to its bound, removed

	for i := range 10 {
		if err := big(bigRecord); err != nil {
			t.Fatal(err)
		}
		// The shell leads a job's group, as a shell's job does, and stays
		// the node's parent (it has more to do after it). It starts the
		// node once its record is forged.
		shell := exec.CommandContext(testkit.Ctx(t), "sh", "-c", `read go; "$0" "$@"; exit $?`, bin, "run", "-quiet", "-max-depth", "0", "-dir", t.TempDir())
		shell.Env = append(os.Environ(), append(withData(data), agentproc.EnvAgentTag+"="+parentTag)...)
		shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var stdout, out bytes.Buffer // out: stderr, where the warnings go
		shell.Stdout, shell.Stderr = &stdout, &out
		start, err := shell.StdinPipe()
		if err == nil {
			err = shell.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		forge(parentTag, procOf(t, shell.Process.Pid))
		if _, err := io.WriteString(start, "go\n"); err != nil {
			t.Fatal(err)
		}
		if err := shell.Wait(); err != nil || !strings.Contains(stdout.String(), "session ") {
			t.Fatalf("run %d: %v, stdout %q, stderr:\n%s", i, err, stdout.String(), out.String())
		}
		for name, p := range map[string]procID{"unrelated process": unrelated, "group leader": leader, "group member": member} {
			if !p.running() {
				t.Fatalf("run %d: the %s (pid %d) was killed\n%s", i, name, p.pid, out.String())
			}
		}
		if n := strings.Count(out.String(), "leaving alone a file it did not write"); n != len(mine) {
			t.Errorf("run %d: %d warnings about others' files, want %d:\n%s", i, n, len(mine), out.String())
		}
		for _, name := range mine {
			if _, err := os.Lstat(filepath.Join(agents, name)); err != nil {
				t.Fatalf("run %d: %s is gone: %v", i, name, err)
			}
		}
		for _, name := range append(slices.Clone(mine), bigRecord) {
			if n := strings.Count(out.String(), filepath.Join(agents, name)); n != 1 {
				t.Errorf("run %d: %s named %d times on stderr, want once:\n%s", i, name, n, out.String())
			}
		}
		if n := strings.Count(out.String(), "removing a record that cannot be read"); n != 1 {
			t.Errorf("run %d: %d unreadable records removed, want 1 (the 100 MB one):\n%s", i, n, out.String())
		}
		if _, err := os.Lstat(filepath.Join(agents, bigRecord)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run %d: the 100 MB file under a record's name is left: %v", i, err)
		}
	}
}

// procOf names a running process by its pid and start time.
func procOf(t *testing.T, pid int) procID {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return procID{pid, st.Starttime}
}

// Contract K4: serve, a cluster node hosting ACP runs, first ends what a
// killed node left on its data directory, as every command that starts
// agents does, before it joins.
func TestK4_ServeEndsWhatAKilledNodeLeft(t *testing.T) {
	data := t.TempDir()
	s := stubbornNode(t, data)
	s.signal(t, syscall.SIGKILL)
	_ = s.wait(t)
	s.fam.waitGone(t, "the agent to die with its node", "leader")
	m := newMember(t)
	p := startNodeWith(t, withData(data), false, append([]string{"serve", "-config", fakeConfig(t)}, static(m)(m)...)...)
	p.line(t, memberLine, "serve to join")
	if !strings.Contains(p.stderr.String(), "ended the processes that agents of an earlier node left running") {
		t.Fatalf("serve's stderr: %s", p.stderr.String())
	}
	s.fam.waitGone(t, "serve to end what the killed node's agent left", "member", "runaway")
	if r := records(t, data); len(r) > 0 {
		t.Fatalf("journal records left: %v", r)
	}
}
