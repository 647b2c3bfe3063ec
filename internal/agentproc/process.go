// Package agentproc runs ACP agent processes for actors/providers/acp:
// each in a process group of its own, stopped on a ladder (close stdin,
// SIGTERM, SIGKILL), tagged so that what it starts can be found, recorded
// in a Journal so that a later node ends what a dead one left, and, for a
// node that adopts orphans, reaped. Only cmd/node uses Journal,
// AdoptOrphans and KillAgents directly.
package agentproc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/subactor/subactor/internal/ids"
)

// ErrUnsupportedPlatform is a Launch on an operating system where the
// provider cannot run an agent as it must: in a process group of its own
// that the shutdown ladder can signal as a whole (Windows and other
// systems without Unix process groups).
// It matches errors.ErrUnsupported.
var ErrUnsupportedPlatform = fmt.Errorf("acp: agent processes need Unix process groups, which this operating system does not have (%w)", errors.ErrUnsupported)

// stderrTail is how much of the end of an agent's standard error is kept
// for error messages.
const stderrTail = 2048

// ExitGrace is how long after the agent process exits its last output may
// still be read before a call waiting on it gives up: a process that
// answered and then exited is not a crash.
const ExitGrace = 250 * time.Millisecond

// groupPoll is how often the ladder looks whether a process group (or a
// set of stray processes) has emptied: its members are not our children,
// so nothing tells us.
const groupPoll = 5 * time.Millisecond

// EnvAgentTag names the variable every agent process gets: a tag unique
// to its launch, appended (after a comma) to the tags its node already
// carries when the node itself runs as an agent. Processes the agent
// starts inherit it unless they clear their environment, so that on Linux
// the ladder and a later node (see Journal) find them even outside the
// agent's process group.
const EnvAgentTag = "SUBACTOR_AGENT_TAG"

// stopSignal is a rung of the ladder: a polite request to end, or the
// kill that cannot be refused.
type stopSignal int

const (
	terminate stopSignal = iota // SIGTERM
	kill                        // SIGKILL
)

// stray is a process an agent started that is found outside the agent's
// process group.
type stray struct {
	pid int
	// ownGroup: it leads a group of its own (it called setsid or setpgid),
	// which is signalled with it.
	ownGroup bool
}

// Proc is one agent process: the leader of a process group of its own, so
// that the ladder can signal whatever it started too (several agents are
// a wrapper around a native binary that does not pass signals on).
//
// All three standard streams are pipes we made, so os/exec starts no
// copying goroutines and Wait waits for the process alone; the stderr
// reader is ours and ends when the group's last writer is gone or when
// Stop closes it.
type Proc struct {
	cmd      *exec.Cmd
	pid      int
	tag      string  // its EnvAgentTag, unique to this launch
	ref      procRef // pid and start time (Linux; the pid alone elsewhere)
	journal  *Journal
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

// Launch starts command in dir with env as the leader of a new process
// group, recorded in journal (which may be nil) while it runs. On error
// nothing is left running and every pipe is closed.
func Launch(command string, args []string, dir string, env []string, stopWait time.Duration, journal *Journal, log *slog.Logger) (*Proc, error) {
	if !processGroups {
		return nil, ErrUnsupportedPlatform
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	// pipe makes a pipe unless one failed already; err is the first
	// failure.
	var err error
	pipe := func() (r, w *os.File) {
		if err == nil {
			if r, w, err = os.Pipe(); err == nil {
				files = append(files, r, w)
			}
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	p := &Proc{
		tag: ids.New(), journal: journal,
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), drained: make(chan struct{}),
		stopWait: stopWait, log: log,
	}
	cmd := exec.Command(command, args...)
	cmd.Dir, cmd.Env = dir, WithTag(env, p.tag)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = groupLeader()
	p.cmd = cmd
	// Recorded before it exists, so that no moment of its life escapes
	// the record.
	if err := journal.begin(p.tag, cmd.Args); err != nil {
		closeAll()
		return nil, err
	}
	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		journal.end(p.tag)
		closeAll()
		return nil, err
	}
	// The child holds its ends now; ours would keep its output open.
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	journal.started(p.tag, cmd.Args, p.ref)
	go func() {
		_, _ = io.Copy(&p.tail, errR)
		close(p.drained)
	}()
	return p, nil
}

// run starts the process, says how that went on started, and reaps it.
// It keeps its OS thread from the start to the reaping: on Linux the
// parent-death signal (see groupLeader) fires when the thread that forked
// the agent ends, not the process, and the Go runtime ends a thread when
// a goroutine locked to it returns without unlocking. Held by this
// goroutine, which is blocked in wait anyway, the thread lives exactly as
// long as the agent needs it to.
func (p *Proc) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Started and registered under fork (see registry).
	agents.fork.RLock()
	err := p.cmd.Start()
	if err == nil {
		p.pid = p.cmd.Process.Pid
		p.ref = identify(p.pid)
		agents.add(p)
	}
	agents.fork.RUnlock()
	started <- err
	if err != nil {
		return
	}
	p.waitErr = p.cmd.Wait()
	close(p.exited)
}

// CloseStdin is the ladder's first rung, and how a turn that gives up
// unblocks a write the agent is not reading.
func (p *Proc) CloseStdin() { p.inOnce.Do(func() { _ = p.stdin.Close() }) }

// ExitStatus says how the leader ended, "" while it runs.
func (p *Proc) ExitStatus() string {
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

// ExitedWithin waits up to d for the leader to be reaped.
func (p *Proc) ExitedWithin(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop ends the process on the ladder (STYLE 8): close its input and
// wait, SIGTERM the group and wait, SIGKILL the group and reap. Then
// whatever the leader left behind in its group is ended the same way, and
// so are the strays (processes of the agent that left its group; Linux),
// and our ends of its pipes are closed. Safe to call more than once;
// every call returns once the first has finished.
func (p *Proc) Stop() {
	p.stopOnce.Do(p.ladder)
}

func (p *Proc) ladder() {
	p.CloseStdin()
	if !p.ExitedWithin(p.stopWait) {
		p.signalGroup(terminate)
		if !p.ExitedWithin(p.stopWait) {
			p.signalGroup(kill)
			if !p.ExitedWithin(p.stopWait) {
				p.log.Error("acp: agent process survives SIGKILL; waiting for it", "pid", p.pid)
				<-p.exited
			}
		}
	}
	// The leader is reaped. Members left in its group are orphans nobody
	// else will stop; while one lives the group id cannot be reused, so
	// signalling it reaches only them.
	if p.groupAlive() {
		p.signalGroup(terminate)
		if !goneWithin(p.stopWait, p.groupAlive) {
			p.signalGroup(kill)
			if !goneWithin(p.stopWait, p.groupAlive) {
				p.log.Error("acp: agent's process group survives SIGKILL", "pgid", p.pid)
			}
		}
	}
	p.endStrays()
	agents.remove(p)
	p.journal.end(p.tag)
	// A process outside the group may still hold the output pipes:
	// closing our ends ends the connection's reader and ours regardless.
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	<-p.drained
}

// endStrays ends, on the same rungs, the processes the agent started that
// left its group and are still found (see strays): SIGTERM, a wait, then
// SIGKILL until none is left, since ending one may hand its own children
// over to us in turn.
func (p *Proc) endStrays() {
	found := strays(p)
	if len(found) == 0 {
		return
	}
	p.log.Info("acp: ending processes the agent left outside its process group", "pgid", p.pid, "count", len(found))
	signalStrays(found, terminate)
	left := func() bool { return len(strays(p)) > 0 }
	if !goneWithin(p.stopWait, left) {
		deadline := time.Now().Add(p.stopWait)
		for found = strays(p); len(found) > 0; found = strays(p) {
			signalStrays(found, kill)
			if time.Now().After(deadline) {
				p.log.Error("acp: processes the agent left outside its group survive SIGKILL", "pgid", p.pid, "count", len(found))
				return
			}
			goneWithin(groupPoll, left)
		}
	}
}

// goneWithin polls alive until it turns false or d has passed, and says
// whether it turned false.
func goneWithin(d time.Duration, alive func() bool) bool {
	deadline := time.After(d)
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for alive() {
		select {
		case <-tick.C:
		case <-deadline:
			return !alive()
		}
	}
	return true
}

// agents are the agent processes this package started in this process
// and has not finished stopping. Which children a process has is a fact
// about the whole process, not about one Provider: KillAgents and the
// reaper of adopted orphans (AdoptOrphans) need all of them.
var agents = &registry{procs: map[*Proc]struct{}{}}

type registry struct {
	// fork is held shared while a process is started and registered, and
	// exclusively by the reaper while it reaps, so that the reaper never
	// takes an agent it has not yet heard of for an orphan.
	fork sync.RWMutex
	mu   sync.Mutex
	// procs is guarded by mu.
	procs map[*Proc]struct{}
}

func (r *registry) add(p *Proc) {
	r.mu.Lock()
	r.procs[p] = struct{}{}
	r.mu.Unlock()
}

func (r *registry) remove(p *Proc) {
	r.mu.Lock()
	delete(r.procs, p)
	r.mu.Unlock()
}

// isLeader reports whether pid is an agent os/exec has yet to reap.
func (r *registry) isLeader(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.procs {
		if p.pid != pid {
			continue
		}
		select {
		case <-p.exited:
		default:
			return true
		}
	}
	return false
}

// count is how many agents are being tracked now.
func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.procs)
}

// list returns the agents being tracked now.
func (r *registry) list() []*Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Keys(r.procs))
}

// KillAgents sends SIGKILL to the process group of every agent this
// package started in this process and has not finished stopping, and to
// the strays of each that can be found (processes it started that left
// its group; Linux), without waiting for anything. It is a program's last
// resort before it exits at once (a second Ctrl-C): the ladder is the
// graceful way. It returns once the leaders are reaped (at most a second)
// and, while this process adopts orphans (AdoptOrphans), the children
// they left have been sent SIGKILL too. Agents it killed are still
// reaped and their journal records removed by their own ladders if the
// program lives on; if it exits, the records stay for the next
// OpenJournal on the directory, which finds nothing left to end.
func KillAgents() {
	procs := agents.list()
	for _, p := range procs {
		p.signalGroup(kill)
		signalStrays(strays(p), kill)
	}
	// The leaders die at once; while this process adopts orphans, what
	// they leave becomes its child, found without a tag.
	expired := time.After(killWait)
wait:
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-expired: // fires once: the leaders left are not waited for
			break wait
		}
	}
	signalStrays(adopted(), kill)
}

// killWait bounds how long KillAgents waits for the leaders it killed.
const killWait = time.Second

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

// PID is the leader's process id (its group's id too).
func (p *Proc) PID() int { return p.pid }

// Stdin is our end of the agent's input.
func (p *Proc) Stdin() *os.File { return p.stdin }

// Stdout is our end of the agent's output.
func (p *Proc) Stdout() *os.File { return p.stdout }

// Exited is closed once the leader has been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Drained is closed once everything the agent wrote to its standard error
// has been read.
func (p *Proc) Drained() <-chan struct{} { return p.drained }

// Stderr is the end of what the agent wrote to its standard error.
func (p *Proc) Stderr() string { return p.tail.String() }
