//go:build unix

package persistence

import (
	"os"
	"syscall"
)

// tryLock takes the exclusive lock bbolt takes on f (flock), without
// waiting; bbolt takes it again on the same file and releases it when it
// closes.
func tryLock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
