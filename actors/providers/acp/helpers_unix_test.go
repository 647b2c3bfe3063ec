//go:build unix

package acp_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// groupGone reports whether no process is left in the process group:
// kill(-pgid, 0) finds none, or (for an orphan that init has yet to reap)
// only zombies.
func groupGone(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return true
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if state, group, ok := procStat(e.Name()); ok && group == pgid && state != "Z" {
			return false
		}
	}
	return true
}

// processGone reports whether the process no longer runs: it does not
// exist, or it is a zombie awaiting its parent.
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	state, _, ok := procStat(strconv.Itoa(pid))
	return !ok || state == "Z"
}

// procStat reads a process's state and process group from /proc.
func procStat(pid string) (state string, pgrp int, ok bool) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 3 {
		return "", 0, false
	}
	g, err := strconv.Atoi(f[2])
	return f[0], g, err == nil
}

// detached starts a process in a session of its own (setsid): it leaves
// its parent's process group.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
