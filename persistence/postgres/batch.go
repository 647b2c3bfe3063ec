package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
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
// sends the next batch, one pipelined transaction of at most one append
// per session (so each AppendAt's fence sees the log as the appends
// before it left it), and so on. One round trip and one WAL flush serve
// the whole batch, where each append alone costs a connection, a round
// trip and a flush of its own. A batch commits or not as a whole: each
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
// while it queued is not sent. A statement that fails rolls its batch
// back: it leaves the batch, which is sent again without it, and runs
// alone afterwards, so that its answer depends on no other call and no
// other call's on it.
func (s *store) runBatch(calls []*appendCall) {
	calls = slices.DeleteFunc(calls, func(c *appendCall) bool {
		if err := c.ctx.Err(); err != nil {
			c.done <- err
			return true
		}
		return false
	})
	var alone []*appendCall
	for len(calls) > 1 {
		failed, err := s.sendBatch(calls)
		if failed < 0 {
			for _, c := range calls {
				c.done <- outcome(err, c)
			}
			calls = nil
			break
		}
		alone = append(alone, calls[failed])
		calls = slices.Delete(calls, failed, failed+1)
	}
	for _, c := range append(alone, calls...) {
		c.done <- s.pool.QueryRow(c.ctx, appendSQL, c.id, c.expect, c.kinds, c.data, c.token).Scan(&c.last)
	}
}

// outcome is a call's outcome in a batch that committed (err nil) or
// that failed as a whole (err).
func outcome(err error, c *appendCall) error {
	if err != nil {
		return err
	}
	if c.last == nil {
		return pgx.ErrNoRows
	}
	return nil
}

// sendBatch sends calls in one transaction. It returns the index of
// the call whose statement the server refused (the transaction rolled
// back), or -1 and the batch's error: nil when it committed, else the
// connection's, which leaves every call's outcome in doubt.
//
// The batch is not bound to any one caller's context, so that a
// caller giving up does not cut its batch-mates' statements short; the
// server's statement timeout and the wait limit bound it.
func (s *store) sendBatch(calls []*appendCall) (failed int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.waitLimit)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	for _, c := range calls {
		c.last = nil
		b.Queue(appendSQL, c.id, c.expect, c.kinds, c.data, c.token)
	}
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	failed = -1
	_, err = br.Exec()
	for i := 0; err == nil && i < len(calls); i++ {
		err = br.QueryRow().Scan(&calls[i].last)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = nil
		case err != nil && !connLost(err):
			failed = i
		}
	}
	if err == nil {
		_, err = br.Exec() // COMMIT
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if failed >= 0 {
		return failed, nil
	}
	return -1, err
}
