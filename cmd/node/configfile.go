package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxConfigFile bounds a -config or -models file: real ones hold a few
// KiB, and reading one must not cost the node without limit.
const maxConfigFile = 1 << 20

// readConfigFile reads the file given to flag (-config or -models). Only a
// regular file of at most maxConfigFile bytes is read: a FIFO or a device
// (/dev/zero) is refused by bad, a constructor of the flag's configuration
// error (exit 2), and so is a larger file; a path that cannot be opened or
// read is an error naming flag (exit 1).
func readConfigFile(flag, path string, bad func(format string, args ...any) error) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO does not wait for a writer (the check
	// below then refuses it). Reads of a regular file ignore the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if m := fi.Mode(); !m.IsRegular() {
		return nil, bad("%s %s: %s, not a regular file", flag, path, fileKind(m))
	}
	// The size Stat tells may be wrong (a file that grows, a /proc file
	// that says 0): the read itself is bounded.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if len(data) > maxConfigFile {
		return nil, bad("%s %s: larger than %d KiB, too large for a configuration file", flag, path, maxConfigFile>>10)
	}
	return data, nil
}

// fileKind names what a file that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
