// Package postgres is a persistence.Backend on PostgreSQL, the store
// several nodes of a cluster share: Open connects a pool (pgxpool) and
// creates or migrates the store's tables.
//
// It keeps the rules of persistence.Store: an append is acknowledged only
// once committed, a failed call changes nothing, and what it reads back is
// checked like the bbolt store's (a *persistence.CorruptError, K3). The
// database enforces AppendAt's fence: a record's key is its session and
// sequence number, and each append moves the session's last sequence
// number in the statement that stores its records, so two writers on two
// nodes cannot interleave a log.
//
// Every write is one statement (Compact one transaction) that carries a
// random token into the rows it writes. Appends of concurrent callers
// share one (a group commit, see commitAppend): each keeps its own
// token, so each learns on its own whether its write landed. When the connection drops with a
// write in flight, the store asks the server, over a new connection,
// whether the token is there: a write that committed is acknowledged, one
// that did not is tried again (or fails, absent, when the context ends),
// so a write is never acknowledged and lost, nor failed and present.
// Calls wait out a server restart (up to a bound, then fail); a write
// whose outcome it cannot learn within that bound fails with
// persistence.ErrFailed and the store refuses later calls, as a bbolt
// store does after a failed fsync.
//
// Statements are bounded by the server's statement_timeout, 30 s unless
// the URL sets it.
//
// Unlike the bbolt store it has no CreateDeferred: a session held in one
// node's memory until its first write would be invisible to the other
// nodes sharing the database, which must find a child's log to continue
// it when its node dies (K2).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/subactor/subactor/persistence"
)

// errNewerSchema means the database holds the store's tables at a schema
// version newer than this binary knows: a newer release migrated it, and
// this one refuses to guess at its layout.
var errNewerSchema = errors.New("postgres: the database schema is newer than this binary knows")

// migrations are the schema's versions in order: migrations[i] takes the
// schema from version i to i+1. Ids and kinds are bytea so that any string
// a caller may use is stored as given and ordered byte by byte, as the
// bbolt store orders them; every row carries the token of the write that
// stored it (see store.write).
var migrations = []string{`
CREATE TABLE subactor_sessions (
	id bytea PRIMARY KEY,
	created bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	parent bytea NOT NULL,
	header bytea NOT NULL,
	last_seq bigint NOT NULL CHECK (last_seq >= 0),
	token bytea NOT NULL
);
CREATE INDEX subactor_sessions_parent ON subactor_sessions (parent, created);
CREATE TABLE subactor_records (
	session_id bytea NOT NULL REFERENCES subactor_sessions (id) ON DELETE CASCADE,
	seq bigint NOT NULL CHECK (seq > 0),
	kind bytea NOT NULL,
	data bytea NOT NULL,
	token bytea NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE subactor_tasks (
	id bytea PRIMARY KEY,
	parent bytea NOT NULL,
	body bytea NOT NULL,
	token bytea NOT NULL
);
CREATE INDEX subactor_tasks_parent ON subactor_tasks (parent, id);
`}

// schemaLock keys the advisory lock under which Open migrates, so that
// nodes starting together migrate once.
const schemaLock = 0x5375626163746f72 // "Subactor"

const (
	// statementTimeout bounds each statement on the server, unless the
	// URL sets statement_timeout.
	statementTimeout = "30s"
	// waitLimit bounds how long a call waits out a lost connection (a
	// server restarting), retrying, or asks after a write in doubt.
	waitLimit = 30 * time.Second
	// maxConns is the pool's size, unless the URL sets pool_max_conns.
	maxConns = 16
)

type store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool
	// failed is set when a write's outcome stayed unknown (see write).
	failed atomic.Bool
	// waitLimit is the package's, shorter in tests.
	waitLimit time.Duration
	// appends is the group commit's queue (see commitAppend).
	appends appendQueue
}

// Open connects to the database at url (a postgres:// URL or a key=value
// string, as pgx reads them), creates the store's tables or migrates
// them to this binary's schema, and returns the store. A schema newer
// than this binary knows is errNewerSchema.
func Open(ctx context.Context, url string) (persistence.Backend, error) {
	return open(ctx, url, waitLimit)
}

func open(ctx context.Context, url string, limit time.Duration) (*store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = statementTimeout
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (the cores, at least 4) caps how many
		// commits can share a WAL flush; a few nodes at this many stay
		// under the server's default 100 connections.
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &store{pool: pool, waitLimit: limit}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// migrate brings the schema to len(migrations) in one transaction.
func (s *store) migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS subactor_schema (version integer PRIMARY KEY)`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM subactor_schema`).Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("%w: it is at version %d, this binary knows up to %d", errNewerSchema, v, len(migrations))
		}
		for ; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO subactor_schema (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNewerSchema) {
		return fmt.Errorf("postgres: open: %w", err)
	}
	return err
}

// Close closes the pool, waiting for calls in flight; later calls fail
// with persistence.ErrClosed. Idempotent.
func (s *store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

// enter starts a call: it fails if ctx has ended or the store is closed
// or failed.
func (s *store) enter(ctx context.Context) error {
	switch {
	case s.closed.Load():
		return persistence.ErrClosed
	case s.failed.Load():
		return fmt.Errorf("%w: a write's outcome is unknown since the server stopped answering", persistence.ErrFailed)
	}
	return ctx.Err()
}

// read runs attempt, a read, again while the connection is lost (the
// server restarting) until it answers, the call's context ends or the
// wait limit passes.
func (s *store) read(ctx context.Context, attempt func(context.Context) error) error {
	return s.write(ctx, attempt, nil)
}

// write runs attempt, one write that commits on its own (a statement, or
// a transaction), and returns once the write is known committed (nil) or
// known absent (an error). A write whose connection was lost with the
// write possibly sent is in doubt: landed, which looks for the write's
// token, tells whether it committed, asked over a new connection until
// the server answers. A write known absent after a lost connection is
// attempted again. A nil landed marks a read, which is always attempted
// again.
func (s *store) write(ctx context.Context, attempt func(context.Context) error, landed func(context.Context) (bool, error)) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(s.waitLimit)
	wait := newBackoff()
	for {
		err := attempt(ctx)
		if err == nil || !connLost(err) {
			return s.mapErr(ctx, err)
		}
		if landed != nil && !pgconn.SafeToRetry(err) {
			ok, known := s.ask(ctx, landed, deadline, wait)
			switch {
			case !known:
				s.failed.Store(true)
				return fmt.Errorf("%w: the connection dropped during a write and the server did not say whether it committed: %v", persistence.ErrFailed, err)
			case ok:
				return nil
			}
		}
		if ctx.Err() != nil || !wait.sleep(ctx, deadline) {
			return s.mapErr(ctx, err)
		}
	}
}

// ask asks landed until it answers or deadline passes. It asks even
// after ctx ends: the caller must learn what became of its write.
func (s *store) ask(ctx context.Context, landed func(context.Context) (bool, error), deadline time.Time, wait *backoff) (ok, known bool) {
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	for {
		ok, err := landed(actx)
		if err == nil {
			return ok, true
		}
		if !connLost(err) || !wait.sleep(actx, deadline) {
			return false, false
		}
	}
}

// mapErr states err as the store's: ErrClosed after Close, the context's
// error when it ended.
func (s *store) mapErr(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case s.closed.Load():
		return fmt.Errorf("%w: %v", persistence.ErrClosed, err)
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("postgres: %w: %v", ctx.Err(), err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || connLost(err) {
		return fmt.Errorf("postgres: %w", err)
	}
	return err // the store's own
}

// connLost reports whether err is the connection failing (or the call's
// context ending while a statement was out) rather than the server
// refusing a statement: the statement may or may not have committed.
func connLost(err error) bool {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, persistence.ErrCorrupt), errors.Is(err, persistence.ErrNotFound):
		// The store's own answers from what it read, whose causes (a
		// truncated JSON value's io.ErrUnexpectedEOF) say nothing of
		// the connection.
		return false
	case errors.As(err, &pgErr):
		// ERROR ends the statement's transaction; FATAL and PANIC end
		// the connection, possibly after a commit.
		return pgErr.Severity != "ERROR"
	}
	var netErr net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// backoff spaces the attempts of one call: 10 ms, doubling up to 1 s.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: 10 * time.Millisecond} }

// sleep waits the next interval and reports true, or false at once if
// the wait would pass deadline or ctx ends first.
func (b *backoff) sleep(ctx context.Context, deadline time.Time) bool {
	if time.Until(deadline) < b.next {
		return false
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
