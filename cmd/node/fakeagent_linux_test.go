package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// startFamily starts the stubborn fake agent's family, each a sleeper
// that ignores SIGTERM: a member of its process group, a runaway that
// leaves the group (setsid) and a clean one that leaves it and clears its
// environment (so it carries no agent tag). Once all run, it writes
// "LEADER MEMBER RUNAWAY CLEAN" (pids) to familyPids in dir.
func startFamily(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sleeper := func(env []string, attr *syscall.SysProcAttr) (int, error) {
		cmd := exec.Command(exe)
		cmd.Env, cmd.SysProcAttr = env, attr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			return 0, err
		}
		// Only once it ignores SIGTERM is it the sleeper tests want.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			return 0, fmt.Errorf("sleeper %d: %w", cmd.Process.Pid, err)
		}
		return cmd.Process.Pid, nil
	}
	inherited := append(os.Environ(), envFakeAgent+"="+modeSleeper)
	member, err := sleeper(inherited, nil)
	if err != nil {
		return err
	}
	runaway, err := sleeper(inherited, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return err
	}
	clean, err := sleeper([]string{envFakeAgent + "=" + modeSleeper, "GORACE=atexit_sleep_ms=0"}, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, familyPids+".tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d %d %d", os.Getpid(), member, runaway, clean), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, familyPids))
}

// parentEnviron says what reading the node's environment gave: "readable"
// and its size, or the error.
func parentEnviron() string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("readable (%d bytes)", len(data))
}

// envExecUnprivileged, set to a program, makes the test binary exec it
// (with the arguments after its own name) without the capabilities that
// let root read any process's memory whatever its dumpable flag:
// CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON leave the bounding set, so
// neither the program nor its children have them. Run as root, the node
// and its agent are then what two processes of an ordinary user are to
// each other. It is done in init, before the tests' TestMain.
const envExecUnprivileged = "NODETEST_EXEC_UNPRIVILEGED"

func init() {
	prog := os.Getenv(envExecUnprivileged)
	if prog == "" {
		return
	}
	// The bounding set belongs to a thread: exec from the one that
	// dropped the capabilities.
	runtime.LockOSThread()
	for _, c := range []uintptr{unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_PERFMON} {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "dropping a capability:", err)
			os.Exit(5)
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envExecUnprivileged+"=") })
	err := unix.Exec(prog, append([]string{prog}, os.Args[1:]...), env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(5)
}
