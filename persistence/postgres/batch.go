package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// appendCall is one attempt of an Append or AppendAt waiting in the
// group commit (see store.commitAppend).
type appendCall struct {
	ctx         context.Context
	id          []byte
	expect      int64
	kinds, data [][]byte
	token       []byte
	// last is where the log ends after the append (appendSQL's row).
	last *int64
	// done gets the call's outcome (pgx.ErrNoRows when appendSQL found
	// no row), or errLead when its caller is to commit the next batch.
	done chan error
}

// errLead hands the group commit to a waiting call's caller.
var errLead = errors.New("postgres: lead the next commit")

// appendQueue holds the appends waiting for the batch in flight.
type appendQueue struct {
	mu      sync.Mutex
	calls   []*appendCall
	leading bool
}

// commitAppend runs c's statement, appendSQL, and returns its outcome.
//
// Appends share transactions (a group commit, as the bbolt store's):
// an append with none in flight commits at once; appends that arrive
// meanwhile queue, and the first of them, once that commit is done,
// sends the next batch, one statement of at most one append per
// session (so each AppendAt's fence sees the log as the appends before
// it left it), and so on. One statement, round trip and WAL flush serve
// the whole batch, where each append alone costs a connection, a
// statement, a round trip and a flush of its own. A batch commits or not as a whole: each
// call's token still tells its caller, on its own, whether it landed
// (see store.write).
func (s *store) commitAppend(c *appendCall) error {
	c.done = make(chan error, 1)
	q := &s.appends
	q.mu.Lock()
	q.calls = append(q.calls, c)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		if err := <-c.done; err != errLead {
			return err
		}
	}
	q.mu.Lock()
	var batch []*appendCall
	seen := map[string]bool{}
	q.calls = slices.DeleteFunc(q.calls, func(c *appendCall) bool {
		if seen[string(c.id)] {
			return false // the next batch's
		}
		seen[string(c.id)] = true
		batch = append(batch, c)
		return true
	})
	q.mu.Unlock()

	s.runBatch(batch)

	q.mu.Lock()
	if len(q.calls) > 0 {
		q.calls[0].done <- errLead
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	return <-c.done
}

// runBatch commits calls, answering each. A call whose context ended
// while it queued is not sent. When the batch's statement fails, the
// server refused one of its appends (and stored none): each call then
// runs alone, so that its answer depends on no other call and no other
// call's on it.
func (s *store) runBatch(calls []*appendCall) {
	calls = slices.DeleteFunc(calls, func(c *appendCall) bool {
		if err := c.ctx.Err(); err != nil {
			c.done <- err
			return true
		}
		return false
	})
	if len(calls) > 1 {
		err := s.sendBatch(calls)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || connLost(err) {
			for _, c := range calls {
				c.done <- outcome(err, c)
			}
			return
		}
	}
	for _, c := range calls {
		c.done <- s.pool.QueryRow(c.ctx, appendSQL, c.id, c.expect, c.kinds, c.data, c.token).Scan(&c.last)
	}
}

// outcome is a call's in a batch that committed (err nil) or that
// failed as a whole (err).
func outcome(err error, c *appendCall) error {
	if err != nil {
		return err
	}
	if c.last == nil {
		return pgx.ErrNoRows
	}
	return nil
}

// batchSQL is appendSQL for many sessions at once, each at most once:
// $1..$3 give each call's session, expected end (-1: any) and record
// count, $4..$9 every call's records, each with its call's session, its
// place among them, their count and its call's token. It returns the
// sessions it appended to and where each now ends. It locks their rows
// in the order of their ids first, so that two nodes' batches never wait
// for each other in a cycle.
const batchSQL = `
WITH l AS (
	SELECT id FROM subactor_sessions WHERE id = ANY($1) ORDER BY id FOR UPDATE
), s AS (
	UPDATE subactor_sessions t SET last_seq = t.last_seq + v.n
	FROM unnest($1::bytea[], $2::bigint[], $3::bigint[]) AS v(id, expect, n), l
	WHERE t.id = v.id AND l.id = v.id AND (v.expect < 0 OR t.last_seq = v.expect)
	RETURNING t.id, t.last_seq
), r AS (
	INSERT INTO subactor_records (session_id, seq, kind, data, token)
	SELECT s.id, s.last_seq - k.n + k.ord, k.kind, k.data, k.token
	FROM unnest($4::bytea[], $5::bigint[], $6::bigint[], $7::bytea[], $8::bytea[], $9::bytea[]) AS k(id, ord, n, kind, data, token)
	JOIN s ON s.id = k.id
)
SELECT id, last_seq FROM s`

// sendBatch appends calls, of distinct sessions, in one statement
// (batchSQL), setting the last of each call it appended to. It fails
// as a whole: a *pgconn.PgError when the server refused it, else the
// connection's error, which leaves every call's outcome in doubt.
//
// The statement is not bound to any one caller's context, so that a
// caller giving up does not cut its batch-mates' appends short; the
// server's statement timeout and the wait limit bound it.
func (s *store) sendBatch(calls []*appendCall) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.waitLimit)
	defer cancel()
	var (
		ids, kinds, data, tokens, recIDs [][]byte
		expects, counts, ords, recCounts []int64
	)
	byID := make(map[string]*appendCall, len(calls))
	for _, c := range calls {
		c.last = nil
		byID[string(c.id)] = c
		n := int64(len(c.kinds))
		ids, expects, counts = append(ids, c.id), append(expects, c.expect), append(counts, n)
		for i := range c.kinds {
			recIDs, ords, recCounts = append(recIDs, c.id), append(ords, int64(i+1)), append(recCounts, n)
			kinds, data, tokens = append(kinds, c.kinds[i]), append(data, c.data[i]), append(tokens, c.token)
		}
	}
	rows, err := s.pool.Query(ctx, batchSQL, ids, expects, counts, recIDs, ords, recCounts, kinds, data, tokens)
	if err != nil {
		return err
	}
	var id []byte
	var last int64
	_, err = pgx.ForEachRow(rows, []any{&id, &last}, func() error {
		if c := byID[string(id)]; c != nil {
			end := last
			c.last = &end
		}
		return nil
	})
	return err
}
