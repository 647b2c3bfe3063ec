//go:build linux || darwin || freebsd

package fstools

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dataAt returns the first run of f's data at or after off, [start, end),
// both at most size; start is size when only a hole is left. The OS tells
// where a sparse file's holes are (lseek SEEK_DATA and SEEK_HOLE); a file
// system that cannot tell has all of it read.
func dataAt(f *os.File, off, size int64) (start, end int64) {
	start, err := f.Seek(off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return size, size // no data after off
	case err != nil:
		return off, size
	}
	if end, err = f.Seek(start, unix.SEEK_HOLE); err != nil {
		end = size
	}
	return min(start, size), min(end, size)
}
