package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// keepPrivate keeps the sessions of the data directory dir from other
// users: they hold every prompt, answer and tool result. The node makes
// the directory 0700 and its store file 0600. The store file is the
// node's own, so one found open to others (an older copy, a restored
// backup) is made private. The directory may be the user's choice (-data):
// one that others can merely list shows them the file's name only and is
// fine, but one they can write to lets them replace the store, so w gets
// a warning saying how to close it, and it is left as it is. Windows has
// no such mode bits.
func keepPrivate(dir, storePath string, w io.Writer) {
	if runtime.GOOS == "windows" {
		return
	}
	// Lstat: a symbolic link's target is not the node's to change.
	if fi, err := os.Lstat(storePath); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(storePath, fi.Mode().Perm()&0o700); err != nil {
			fmt.Fprintf(w, "%s: warning: %s is open to other users (mode %04o) and could not be made private: %v\n", prog, storePath, fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o022 != 0 {
		fmt.Fprintf(w, "%s: warning: other users can write to data directory %q (mode %04o) and so replace its sessions: chmod 700 it\n", prog, dir, fi.Mode().Perm())
	}
}
