//go:build unix && !linux && !freebsd

package agentproc

import "syscall"

// groupLeader is how an agent is started: as the leader of a new process
// group (this system has no parent-death signal).
func groupLeader() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
