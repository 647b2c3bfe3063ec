//go:build unix

package agentproc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// processGroups: Unix has them.
const processGroups = true

var unixSignals = map[stopSignal]unix.Signal{terminate: unix.SIGTERM, kill: unix.SIGKILL}

// errSpared is a signal send refused: to pid 1 or below (kill(-1, ...)
// would reach every process the node may signal, kill(0, ...) its own
// group), or to this process or its own group.
var errSpared = errors.New("acp: refusing to signal init, every process or the node itself")

// send is the one place this package signals: pid, or with group the
// process group pid leads. Whatever chose pid, the ids that would reach
// init, every process or this node are refused here (K4).
func send(pid int, group bool, sig unix.Signal) error {
	if pid <= 1 || pid == os.Getpid() || (group && pid == unix.Getpgrp()) {
		return fmt.Errorf("%w (pid %d, group %t)", errSpared, pid, group)
	}
	if group {
		pid = -pid
	}
	return unix.Kill(pid, sig)
}

func (p *Proc) signalGroup(sig stopSignal) {
	if err := send(p.pid, true, unixSignals[sig]); err != nil && !errors.Is(err, unix.ESRCH) {
		p.log.Warn("acp: signalling the agent's process group", "pgid", p.pid, "signal", unixSignals[sig], "err", err)
	}
}

// groupAlive reports whether any live process is left in the group. A
// zombie counts as gone: it has ended, and reaping an orphan is its new
// parent's job (init's, which may take its time).
func (p *Proc) groupAlive() bool {
	if errors.Is(send(p.pid, true, 0), unix.ESRCH) {
		return false
	}
	live, err := liveMembers(p.pid)
	return err != nil || live
}

// signalStrays signals each stray, and the group of one that leads its
// own, ignoring those that have gone meanwhile.
func signalStrays(found []stray, sig stopSignal) {
	for _, s := range found {
		if s.ownGroup {
			_ = send(s.pid, true, unixSignals[sig])
		}
		_ = send(s.pid, false, unixSignals[sig])
	}
}

// CanEnter reports whether the node may enter dir (search permission).
func CanEnter(dir string) error { return unix.Access(dir, unix.X_OK) }

// signalGroups signals whole process groups whose leaders may be gone.
func signalGroups(groups []int, sig stopSignal) {
	for _, g := range groups {
		_ = send(g, true, unixSignals[sig])
	}
}
