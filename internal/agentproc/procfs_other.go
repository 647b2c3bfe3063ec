//go:build !linux

package agentproc

import (
	"errors"
	"fmt"
	"os"
)

// Without Linux's /proc: no journal, no strays, no adopted orphans, and a
// process group counts as alive while the kernel knows it.

const tracked = false

func bootID() (string, error) { return "", nil }

func identify(pid int) procRef { return procRef{PID: pid} }

func alive(procRef) bool { return false }

func liveMembers(int) (bool, error) { return true, nil }

func strays(*Proc) []stray { return nil }

func adopted() []stray { return nil }

func takeSnapshot(uint64) (snapshot, error) { return snapshot{}, errors.ErrUnsupported }

func openRecord(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// AdoptOrphans makes the process a child subreaper on Linux; here it
// returns an error wrapping errors.ErrUnsupported.
func AdoptOrphans() (stop func(), err error) {
	return nil, fmt.Errorf("acp: adopting orphans needs Linux: %w", errors.ErrUnsupported)
}
