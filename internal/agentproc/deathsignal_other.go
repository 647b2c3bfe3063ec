//go:build unix && !linux && !freebsd

package agentproc

import "syscall"

// withDeathSignal does nothing: this system has no parent-death signal.
func withDeathSignal(*syscall.SysProcAttr) {}
