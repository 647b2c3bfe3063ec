//go:build !unix

package agentproc

import "syscall"

// processGroups: this system has no Unix process groups, so launch
// refuses with ErrUnsupportedPlatform and nothing below is ever reached.
const processGroups = false

func groupLeader() *syscall.SysProcAttr { return nil }

func (p *Proc) signalGroup(stopSignal) {}

func (p *Proc) groupAlive() bool { return false }

func signalStrays([]stray, stopSignal) {}

// CanEnter has no search permission to check here: a directory that
// cannot be entered fails the start instead.
func CanEnter(string) error { return nil }

func signalGroups([]int, stopSignal) {}
