//go:build unix

package agentproc

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Contract K4: the one function that signals refuses, whoever chose the
// pid, every id that would reach init, every process (kill(-1)), the
// caller's group (kill(0)) or this process and its group. Signal 0 sends
// nothing, so a refusal that failed would harm no one.
func TestK4_SendRefusesInitEveryoneAndTheNodeItself(t *testing.T) {
	for _, c := range []struct {
		pid   int
		group bool
	}{{1, false}, {1, true}, {0, false}, {0, true}, {-1, false}, {-1, true}, {os.Getpid(), false}, {unix.Getpgrp(), true}} {
		if err := send(c.pid, c.group, 0); !errors.Is(err, errSpared) {
			t.Errorf("send(%d, group %t) = %v, want errSpared", c.pid, c.group, err)
		}
	}
	if err := send(os.Getppid(), false, 0); err != nil {
		t.Errorf("send to the parent with signal 0: %v", err)
	}
}
