package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/persistence"
)

// Where the node keeps its sessions.
const (
	// envDataDir names the data directory when -data does not.
	envDataDir = "SUBACTOR_DATA_DIR"
	// memoryData, given as the data directory, keeps sessions in memory:
	// they end with the process.
	memoryData = ":memory:"
	// appName is the data directory's name under $XDG_DATA_HOME.
	appName = "subactor"
	// storeFile is the bbolt file inside the data directory.
	storeFile = "sessions.db"
)

// Data directory errors, matched with errors.Is; each comes wrapped in a
// *dataDirError naming the directory.
var (
	// errDataDirLocked means another process (a node still running) holds
	// the store file: bbolt allows one at a time.
	errDataDirLocked = errors.New("it is in use by another node process")
	// errNoDataDir means no data directory could be found: no -data, no
	// SUBACTOR_DATA_DIR and no home directory.
	errNoDataDir = errors.New("no data directory: give -data DIR or set " + envDataDir + " (no $XDG_DATA_HOME or home directory to default to)")
)

// dataDirError reports a data directory the node cannot use, naming it.
type dataDirError struct {
	Dir string
	Err error
}

func (e *dataDirError) Error() string {
	return fmt.Sprintf("data directory %q: %v", e.Dir, e.Err)
}

func (e *dataDirError) Unwrap() error { return e.Err }

// dataDir resolves the data directory: the -data flag, else
// SUBACTOR_DATA_DIR, else the XDG base directory convention
// ($XDG_DATA_HOME/subactor, else ~/.local/share/subactor). It may return
// memoryData.
func dataDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if dir := os.Getenv(envDataDir); dir != "" {
		return dir, nil
	}
	// The XDG spec has implementations ignore a relative $XDG_DATA_HOME.
	if xdg := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, appName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errNoDataDir
	}
	return filepath.Join(home, ".local", "share", appName), nil
}

// openStore opens the session store of the data directory dir (see
// dataDir): the bbolt file in it, or a fresh in-memory store for
// memoryData. With create it makes the directory (0700, the owner's only)
// when missing; without, a missing directory or file is a store with no
// sessions, opened in memory so that reading never leaves files behind.
// The returned close function releases the file. Errors name dir.
func openStore(dir string, create bool) (persistence.Store, func() error, error) {
	noop := func() error { return nil }
	if dir == memoryData {
		return persistence.NewMemory(), noop, nil
	}
	path := filepath.Join(dir, storeFile)
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, &dataDirError{Dir: dir, Err: err}
		}
	} else if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return persistence.NewMemory(), noop, nil
	}
	keepPrivate(dir, path, os.Stderr)
	b, err := persistence.OpenBolt(path)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		// OpenBolt waited about a second for the lock: the other holder
		// is not an exiting process but a live one.
		return nil, nil, &dataDirError{Dir: dir, Err: fmt.Errorf("%w (%s is locked; wait for it to end or give another -data): %w", errDataDirLocked, storeFile, err)}
	case err != nil:
		return nil, nil, &dataDirError{Dir: dir, Err: err}
	}
	return b, b.Close, nil
}
