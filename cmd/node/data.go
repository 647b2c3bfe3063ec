package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/postgres"
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
	// envStore names the session store when -store does not.
	envStore = "SUBACTOR_STORE"
)

// dataPlace is where a node keeps its data: the data directory (-data)
// and the session store (-store), which is the directory's storeFile
// when empty, else a PostgreSQL URL. The directory keeps the agent
// journal either way: it is this machine's, the store may be shared.
type dataPlace struct{ dir, store string }

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

// dataDir resolves the flags' data place: the store is -store, else
// SUBACTOR_STORE, else the directory's file; the directory is -data,
// else SUBACTOR_DATA_DIR, else the XDG base directory convention
// ($XDG_DATA_HOME/subactor, else ~/.local/share/subactor), and may be
// memoryData when the store is the directory's.
func dataDir(flags dataPlace) (dataPlace, error) {
	store := cmp.Or(flags.store, os.Getenv(envStore))
	if store != "" && !strings.HasPrefix(store, "postgres://") && !strings.HasPrefix(store, "postgresql://") {
		return dataPlace{}, configErrorf("-store %s: not a postgres:// URL (without -store, sessions are kept in the data directory)", redact(store))
	}
	dir, err := dirOf(flags.dir)
	switch {
	case err != nil:
		return dataPlace{}, err
	case dir == memoryData && store != "":
		return dataPlace{}, configErrorf("-data %s keeps sessions in memory, -store in PostgreSQL: give one", memoryData)
	}
	return dataPlace{dir: dir, store: store}, nil
}

// String names where the sessions are, for messages.
func (d dataPlace) String() string {
	if d.store != "" {
		return "store " + redact(d.store)
	}
	return fmt.Sprintf("data directory %q", d.dir)
}

// dirOf resolves the data directory (see dataDir).
func dirOf(flagValue string) (string, error) {
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

// openStore opens the session store of data (see dataDir) for writing:
// its PostgreSQL database, the bbolt file in its directory, or a fresh
// in-memory store for memoryData. With create it makes the directory
// (0700, the owner's only) when missing; without, a missing directory or
// file is a store with no sessions, opened in memory so that nothing is
// left behind. While the file is open, the node answers node sessions
// over a socket in the directory (see serveSessions). The returned close
// function stops that and releases the file. Errors name the directory
// or the database.
func openStore(ctx context.Context, data dataPlace, create bool) (persistence.Store, func() error, error) {
	if data.store != "" {
		// Every process reads the database itself: no lock keeps
		// node sessions out, so no socket answers for it.
		return openPostgres(ctx, data.store)
	}
	dir := data.dir
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
	if err != nil {
		// OpenBolt waited about a second for a lock: the other holder is
		// not an exiting process but a live one.
		return nil, nil, storeError(dir, err)
	}
	warnDamage(dir, b)
	stop := serveSessions(dir, b)
	return b, func() error {
		stop()
		return b.Close()
	}, nil
}

// openReader opens the session store of data (not memoryData) for
// reading only: nothing is written to a data directory or created in it,
// and it works on a read-only directory. A missing directory or file is an
// empty store. While a node uses the directory, it fails at once with
// errDataDirLocked. A PostgreSQL store is opened as openStore opens it
// (which creates its tables in an empty database).
func openReader(ctx context.Context, data dataPlace) (persistence.Store, func() error, error) {
	if data.store != "" {
		return openPostgres(ctx, data.store)
	}
	dir := data.dir
	path := filepath.Join(dir, storeFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return persistence.NewMemory(), func() error { return nil }, nil
	}
	b, err := persistence.OpenBoltReadOnly(path)
	if errors.Is(err, persistence.ErrEmpty) {
		// A node killed while it created the file: nothing was stored.
		return persistence.NewMemory(), func() error { return nil }, nil
	}
	if err != nil {
		return nil, nil, storeError(dir, err)
	}
	warnDamage(dir, b)
	return b, b.Close, nil
}

// openPostgres opens the PostgreSQL store at url; errors name it without
// its password.
func openPostgres(ctx context.Context, url string) (persistence.Store, func() error, error) {
	s, err := postgres.Open(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: %w", redact(url), err)
	}
	return s, s.Close, nil
}

// redact is a store URL fit to print: its password, if any, replaced.
func redact(store string) string {
	u, err := neturl.Parse(store)
	if err != nil {
		return "(an unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// warnDamage says on stderr what the store of dir reads around (a damaged
// meta page: it reads the commit before it), and how to check it.
func warnDamage(dir string, store persistence.Store) {
	damaged, ok := store.(interface{ OpenDamage() []error })
	if !ok {
		return
	}
	for _, err := range damaged.OpenDamage() {
		fmt.Fprintf(os.Stderr, "%s: warning: data directory %q: %v; run \"%s check -data %s\"\n", prog, dir, err, prog, dir)
	}
}

// storeError is the error for a store file of dir that did not open: a
// *dataDirError, saying which process holds a locked file and how to
// repair a damaged one.
func storeError(dir string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		holder := ""
		if pid := lockHolder(filepath.Join(dir, storeFile)); pid > 0 {
			holder = fmt.Sprintf(", pid %d", pid)
		}
		err = fmt.Errorf("%w%s (%s is locked; wait for it to end or give another -data): %w", errDataDirLocked, holder, storeFile, err)
	case errors.Is(err, persistence.ErrCorrupt):
		err = fmt.Errorf("%w\nrun \"%s check -repair -data %s\" to copy every readable session into a fresh file", err, prog, dir)
	}
	return &dataDirError{Dir: dir, Err: err}
}

// sessionsSocket is the unix socket in the data directory on which a node
// that has the store open answers node sessions: bbolt's lock keeps every
// other process out of the file while it runs.
const sessionsSocket = "node.sock"

// sessionsRequest asks the node on sessionsSocket for the listing that
// node sessions [SESSION] prints.
type sessionsRequest struct {
	Session string `json:"session,omitempty"`
	JSON    bool   `json:"json,omitempty"` // sessions -json
}

// sessionsReply is that listing: what node sessions prints and its exit
// code, and the answering node's pid.
type sessionsReply struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
	PID    int    `json:"pid"`
}

// liveWait bounds how long either side of sessionsSocket waits for the
// other: a live node answers in milliseconds.
const liveWait = 5 * time.Second

// serveSessions answers sessionsRequests on sessionsSocket in dir with
// store's listing until the returned function is called, which waits for
// the answers in flight and removes the socket. Without a socket (a
// directory path too long for one, say), node sessions says which process
// holds the directory instead.
func serveSessions(dir string, store persistence.Store) (stop func()) {
	path := filepath.Join(dir, sessionsSocket)
	// Left behind by a node that was killed; this process holds the
	// store's lock, so no live node owns it.
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return func() {}
	}
	_ = os.Chmod(path, 0o600) // the owner's, as the directory is
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed by stop
			}
			wg.Go(func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(liveWait))
				var req sessionsRequest
				if err := json.NewDecoder(io.LimitReader(conn, 64<<10)).Decode(&req); err != nil {
					return
				}
				var out, errs bytes.Buffer
				code := listSessions(ctx, store, dataPlace{dir: dir}, req, &out, &errs)
				_ = json.NewEncoder(conn).Encode(sessionsReply{Stdout: out.String(), Stderr: errs.String(), Code: code, PID: os.Getpid()})
			})
		}
	})
	return func() {
		cancel()
		_ = ln.Close() // removes the socket file too
		wg.Wait()
	}
}

// askLiveNode asks the node that holds dir for node sessions' listing of
// session ("" for the top-level ones); ok is false when no node answers.
func askLiveNode(ctx context.Context, dir string, req sessionsRequest) (reply sessionsReply, ok bool) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	conn, err := d.DialContext(ctx, "unix", filepath.Join(dir, sessionsSocket))
	if err != nil {
		return reply, false
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reply, false
	}
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		return reply, false
	}
	return reply, true
}
