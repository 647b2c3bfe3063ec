package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder returns the pid of the process holding the exclusive lock
// on the file at path, from Linux's /proc/locks; 0 when it cannot tell.
// (Lines read "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF", the
// last field before the range being major:minor:inode; a blocked
// waiter's line has "->" after the number.)
func lockHolder(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10)
	for line := range strings.Lines(string(locks)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" || !strings.HasSuffix(f[5], ino) {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			return pid
		}
	}
	return 0
}
