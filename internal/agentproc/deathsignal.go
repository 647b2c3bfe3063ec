//go:build linux || freebsd

package agentproc

import "syscall"

// withDeathSignal has the kernel SIGKILL the agent when the node dies
// without a chance to stop it (SIGKILL, a crash). Only the leader gets it:
// what it started is ended by the next node on the data directory (see
// Journal).
func withDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
