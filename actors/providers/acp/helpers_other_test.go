//go:build !unix

package acp_test

import "syscall"

// Without Unix process groups no agent starts (errors.ErrUnsupported):
// the tests that call these never get as far.

func groupGone(int) bool { return true }

func processGone(int) bool { return true }

func detached() *syscall.SysProcAttr { return nil }
