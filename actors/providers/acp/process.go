package acp

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stderrTail is how much of the end of an agent's standard error is kept
// for error messages.
const stderrTail = 2048

// exitGrace is how long after the agent process exits its last output may
// still be read before a call waiting on it gives up: a process that
// answered and then exited is not a crash.
const exitGrace = 250 * time.Millisecond

// groupPoll is how often the ladder looks whether a process group has
// emptied: its members are not our children, so nothing tells us.
const groupPoll = 5 * time.Millisecond

// proc is one agent process: the leader of a process group of its own, so
// that the ladder can signal whatever it started too (several agents are
// a wrapper around a native binary that does not pass signals on).
//
// All three standard streams are pipes we made, so os/exec starts no
// copying goroutines and Wait waits for the process alone; the stderr
// reader is ours and ends when the group's last writer is gone or when
// stop closes it.
type proc struct {
	cmd      *exec.Cmd
	pid      int
	stdin    *os.File // our end: the agent's input
	stdout   *os.File // our end: the agent's output, read by the SDK connection
	stderr   *os.File // our end: read into tail
	tail     tailBuffer
	exited   chan struct{} // closed once the leader has been reaped
	waitErr  error         // how it ended; read after exited
	drained  chan struct{} // closed once the stderr reader returned
	stopWait time.Duration
	log      *slog.Logger
	inOnce   sync.Once
	stopOnce sync.Once
}

// launch starts command in dir with env as the leader of a new process
// group. On error nothing is left running and every pipe is closed.
func launch(command string, args []string, dir string, env []string, stopWait time.Duration, log *slog.Logger) (*proc, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command(command, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child holds its ends now; ours would keep its output open.
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	p := &proc{
		cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), drained: make(chan struct{}),
		stopWait: stopWait, log: log,
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go func() {
		_, _ = io.Copy(&p.tail, errR)
		close(p.drained)
	}()
	return p, nil
}

// closeStdin is the ladder's first rung, and how a turn that gives up
// unblocks a write the agent is not reading.
func (p *proc) closeStdin() { p.inOnce.Do(func() { _ = p.stdin.Close() }) }

// exitStatus says how the leader ended, "" while it runs.
func (p *proc) exitStatus() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	if p.waitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ProcessState.String()
	}
	return p.waitErr.Error()
}

// exitedWithin waits up to d for the leader to be reaped.
func (p *proc) exitedWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the process on the ladder (STYLE 8): close its input and
// wait, SIGTERM the group and wait, SIGKILL the group and reap. Then
// whatever the leader left behind in its group is ended the same way, and
// our ends of its pipes are closed. Safe to call more than once; every
// call returns once the first has finished.
func (p *proc) stop() {
	p.stopOnce.Do(p.ladder)
}

func (p *proc) ladder() {
	p.closeStdin()
	if !p.exitedWithin(p.stopWait) {
		p.signalGroup(syscall.SIGTERM)
		if !p.exitedWithin(p.stopWait) {
			p.signalGroup(syscall.SIGKILL)
			if !p.exitedWithin(p.stopWait) {
				p.log.Error("acp: agent process survives SIGKILL; waiting for it", "pid", p.pid)
				<-p.exited
			}
		}
	}
	// The leader is reaped. Members left in its group are orphans nobody
	// else will stop; while one lives the group id cannot be reused, so
	// signalling it reaches only them.
	if p.groupAlive() {
		p.signalGroup(syscall.SIGTERM)
		if !p.groupGoneWithin(p.stopWait) {
			p.signalGroup(syscall.SIGKILL)
			if !p.groupGoneWithin(p.stopWait) {
				p.log.Error("acp: agent's process group survives SIGKILL", "pgid", p.pid)
			}
		}
	}
	// A process outside the group may still hold the output pipes:
	// closing our ends ends the connection's reader and ours regardless.
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	<-p.drained
}

func (p *proc) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("acp: signalling the agent's process group", "pgid", p.pid, "signal", sig, "err", err)
	}
}

// groupAlive reports whether any live process is left in the group. A
// zombie counts as gone: it has ended, and reaping an orphan is its new
// parent's job (init's, which may take its time).
func (p *proc) groupAlive() bool {
	if errors.Is(syscall.Kill(-p.pid, 0), syscall.ESRCH) {
		return false
	}
	live, err := liveMembers(p.pid)
	return err != nil || live
}

// liveMembers reports whether a process that is not a zombie belongs to
// process group pgid, from /proc (Linux).
func liveMembers(pgid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything but
		// the last ")".
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && pid > 0 {
			return true, nil
		}
	}
	return false, nil
}

func (p *proc) groupGoneWithin(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for p.groupAlive() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return !p.groupAlive()
		}
	}
	return true
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if len(b) >= stderrTail {
		b = b[len(b)-stderrTail:]
		t.buf = t.buf[:0]
	}
	if over := len(t.buf) + len(b) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
