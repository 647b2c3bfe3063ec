//go:build unix

package agentproc

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processGroups: Unix has them.
const processGroups = true

var unixSignals = map[stopSignal]unix.Signal{terminate: unix.SIGTERM, kill: unix.SIGKILL}

func (p *Proc) signalGroup(sig stopSignal) {
	if err := unix.Kill(-p.pid, unixSignals[sig]); err != nil && !errors.Is(err, unix.ESRCH) {
		p.log.Warn("acp: signalling the agent's process group", "pgid", p.pid, "signal", unixSignals[sig], "err", err)
	}
}

// groupAlive reports whether any live process is left in the group. A
// zombie counts as gone: it has ended, and reaping an orphan is its new
// parent's job (init's, which may take its time).
func (p *Proc) groupAlive() bool {
	if errors.Is(unix.Kill(-p.pid, 0), unix.ESRCH) {
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
			_ = unix.Kill(-s.pid, unixSignals[sig])
		}
		_ = unix.Kill(s.pid, unixSignals[sig])
	}
}

// CanEnter reports whether the node may enter dir (search permission).
func CanEnter(dir string) error { return unix.Access(dir, unix.X_OK) }

// signalGroups signals whole process groups whose leaders may be gone.
func signalGroups(groups []int, sig stopSignal) {
	for _, g := range groups {
		_ = unix.Kill(-g, unixSignals[sig])
	}
}
