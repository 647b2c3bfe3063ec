package agentproc

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// What Linux's /proc lets this package do: tell a process from a later
// one with the same pid (start times), find an agent's processes by its
// tag wherever they went, and adopt and reap orphans.

// tracked: the journal records and sweeps here.
const tracked = true

// bootID is the kernel's id of this boot of the machine.
func bootID() (string, error) {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(data)), err
}

// identify returns pid with its start time; the start time is 0 if the
// process cannot be read.
func identify(pid int) procRef {
	ref := procRef{PID: pid}
	if p, err := procfs.NewProc(pid); err == nil {
		if st, err := p.Stat(); err == nil {
			ref.Start = st.Starttime
		}
	}
	return ref
}

// alive reports whether the process ref names still runs (as a zombie
// too: it has not been reaped).
func alive(ref procRef) bool {
	got := identify(ref.PID)
	return got.Start != 0 && got == ref
}

// zombie: the process has ended and waits to be reaped ("Z"), or is
// being torn down ("X").
func zombie(st procfs.ProcStat) bool { return st.State == "Z" || st.State == "X" }

// liveMembers reports whether a process that is not a zombie belongs to
// process group pgid.
func liveMembers(pgid int) (bool, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return false, err
	}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PGRP == pgid && !zombie(st) {
			return true, nil
		}
	}
	return false, nil
}

// tags are the agent tags a process carries in its environment, nil if
// it carries none or its environment cannot be read.
func tags(p procfs.Proc) []string {
	env, err := p.Environ()
	if err != nil {
		return nil
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvAgentTag+"="); ok {
			return strings.Split(v, ",")
		}
	}
	return nil
}

// strays are the live processes of agent p outside its process group:
// those that carry its tag, and, while this process adopts orphans and p
// is the only agent left, every adopted child (a descendant of this or an
// earlier agent whose parent died: one without a tag cannot be told apart
// otherwise).
func strays(p *Proc) []stray {
	return scan(func(q procfs.Proc, st procfs.ProcStat, adoptedChild bool) bool {
		switch {
		case st.PGRP == p.pid:
			return false
		case adoptedChild && agents.count() <= 1:
			return true
		}
		// Only a process that started after the agent can carry its tag:
		// the environments of older ones need not be read.
		return st.Starttime >= p.ref.Start && slices.Contains(tags(q), p.tag)
	})
}

// adopted are the live children this process adopted (see AdoptOrphans);
// none when it does not adopt.
func adopted() []stray {
	return scan(func(_ procfs.Proc, _ procfs.ProcStat, adoptedChild bool) bool { return adoptedChild })
}

// scan returns the live processes other than this one that match says
// are wanted; adoptedChild tells match that the process is a child this
// process adopted (not an agent, and adopting is on).
func scan(match func(q procfs.Proc, st procfs.ProcStat, adoptedChild bool) bool) []stray {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	adopts := adopting.Load()
	var found []stray
	for _, q := range procs {
		st, err := q.Stat()
		if err != nil || q.PID == self || zombie(st) {
			continue
		}
		if match(q, st, adopts && st.PPID == self && !agents.isLeader(q.PID)) {
			found = append(found, stray{pid: q.PID, ownGroup: st.PGRP == q.PID})
		}
	}
	return found
}

// takeSnapshot reads the live processes. Their tags are read only for
// those that started at or after since: an older one cannot carry the tag
// of an agent that started later.
func takeSnapshot(since uint64) (snapshot, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return snapshot{}, err
	}
	snap := snapshot{self: os.Getpid(), procs: make(map[int]procInfo, len(procs))}
	for _, q := range procs {
		st, err := q.Stat()
		if err != nil || zombie(st) {
			continue
		}
		p := procInfo{PID: q.PID, PPID: st.PPID, PGID: st.PGRP, SID: st.Session, Start: st.Starttime}
		if st.Starttime >= since {
			p.Tags = tags(q)
		}
		snap.procs[q.PID] = p
	}
	return snap, nil
}

// openRecord opens a journal file for reading without following a link
// and without waiting on a FIFO, and refuses anything but a regular file
// (errNotRegular).
func openRecord(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errNotRegular
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, cmp.Or(err, errNotRegular)
	}
	return f, nil
}

// adopting is set while AdoptOrphans is in effect.
var adopting atomic.Bool

// AdoptOrphans makes this process a child subreaper (Linux): a process an
// agent started that outlives its parent becomes this process's child
// instead of init's, also one that left the agent's process group
// (setsid) and cleared its environment, so that the agent's ladder finds
// it and ends it (once no other agent runs, when it carries no tag that
// says whose it is), and this process reaps it when it exits.
//
// Call it once, early, in a program that starts child processes through
// this package only (as the node does): the reaper reaps every child
// that exits and is not an agent of this package, and would take another
// child's exit status from its os/exec Wait. The returned function stops
// reaping and adopting. Elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func AdoptOrphans() (stop func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("acp: becoming a child subreaper: %w", err)
	}
	adopting.Store(true)
	exits := make(chan os.Signal, 1)
	signal.Notify(exits, unix.SIGCHLD)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-exits:
				reapOrphans()
			case <-done:
				return
			}
		}
	})
	return sync.OnceFunc(func() {
		signal.Stop(exits)
		close(done)
		wg.Wait()
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		adopting.Store(false)
		reapOrphans()
	}), nil
}

// reapOrphans reaps every child of this process that has exited and is
// not an agent os/exec waits for.
func reapOrphans() {
	agents.fork.Lock()
	defer agents.fork.Unlock()
	procs, err := procfs.AllProcs()
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, q := range procs {
		if st, err := q.Stat(); err == nil && st.PPID == self && zombie(st) && !agents.isLeader(q.PID) {
			_, _ = unix.Wait4(q.PID, nil, unix.WNOHANG, nil)
		}
	}
}
