//go:build !unix

package acp

import "syscall"

// processGroups: this system has no Unix process groups, so launch
// refuses with ErrUnsupportedPlatform and nothing below is ever reached.
const processGroups = false

func groupLeader() *syscall.SysProcAttr { return nil }

func (p *proc) signalGroup(stopSignal) {}

func (p *proc) groupAlive() bool { return false }

func signalStrays([]stray, stopSignal) {}

// canEnter has no search permission to check here: a directory that
// cannot be entered fails the start instead.
func canEnter(string) error { return nil }

func signalGroups([]int, stopSignal) {}
