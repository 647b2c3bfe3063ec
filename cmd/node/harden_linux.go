package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// harden makes the node non-dumpable, so that a process of the same user
// (an agent it started, say) can read neither its environment
// (/proc/PID/environ, where its API keys are) nor its memory, nor attach
// a debugger to it. Root, or a process with CAP_SYS_PTRACE, still can.
// The agents themselves are dumpable again: exec resets the flag.
func harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot make the node non-dumpable, so its agents may read its environment: %w", err)
	}
	return nil
}
