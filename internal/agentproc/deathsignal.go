//go:build linux || freebsd

package agentproc

import "syscall"

// groupLeader is how an agent is started: as the leader of a new process
// group, with a parent-death signal: the kernel SIGKILLs it when the node
// dies without a chance to stop it (SIGKILL, a crash). Only the leader
// gets it: what it started is ended by the next node on the data
// directory (see Journal).
func groupLeader() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
