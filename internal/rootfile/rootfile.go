// Package rootfile opens files under an os.Root for code that serves
// hostile paths (a model's tool call, an ACP agent's fs request): only a
// regular file (or, for OpenDir, a directory) is opened, and opening never
// blocks. A FIFO opened the ordinary way waits for its other end, holding
// an OS thread for as long as it takes; a device may act on being opened.
// So the name is checked before it is opened, the open itself does not
// wait (O_NONBLOCK where the system has it), and the opened file is
// checked again, since the name may have changed in between.
package rootfile

import (
	"errors"
	"io/fs"
	"os"
)

// Errors of this package, matched with errors.Is. Their text reads after
// a name ("%q is %w"), which is how callers show them.
var (
	// ErrNotRegular is a name that is not a regular file: a FIFO, a
	// device, a socket or a directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDir is a name OpenDir was given that is not a directory.
	ErrNotDir = errors.New("not a directory")
)

// Open opens name under r for reading; it must be a regular file.
func Open(r *os.Root, name string) (*os.File, error) {
	f, _, err := open(r, name, os.O_RDONLY, 0, false)
	return f, err
}

// OpenInfo is Open that also returns what the opened file's check found
// (its size, say), sparing the caller a Stat of its own.
func OpenInfo(r *os.Root, name string) (*os.File, fs.FileInfo, error) {
	return open(r, name, os.O_RDONLY, 0, false)
}

// OpenDir opens name under r for reading its entries; it must be a
// directory.
func OpenDir(r *os.Root, name string) (*os.File, error) {
	f, _, err := open(r, name, os.O_RDONLY, 0, true)
	return f, err
}

// Create opens name under r for writing, truncated, created with perm
// when missing; an existing name must be a regular file.
func Create(r *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	f, _, err := open(r, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm, false)
	return f, err
}

func open(r *os.Root, name string, flag int, perm fs.FileMode, dir bool) (*os.File, fs.FileInfo, error) {
	fi, err := r.Stat(name)
	switch {
	case err == nil:
		if err := check(fi, dir); err != nil {
			return nil, nil, err
		}
	case flag&os.O_CREATE == 0 || !errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	}
	// nonBlock: opening a FIFO put there since the check does not wait
	// for its other end (the check below then refuses it). It also spares
	// os the two fcntl calls it makes to set the flag and the two to clear
	// it again once epoll turns a regular file or directory down; reads
	// and writes of those ignore the flag.
	f, err := r.OpenFile(name, flag|nonBlock, perm)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = check(fi, dir)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func check(fi fs.FileInfo, dir bool) error {
	switch {
	case dir && !fi.IsDir():
		return ErrNotDir
	case !dir && !fi.Mode().IsRegular():
		return ErrNotRegular
	}
	return nil
}
