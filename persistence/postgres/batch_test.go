package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/pgtest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// TestS8_AFailingStatementInABatchFailsOnlyItself sends one batch of
// four appends, one of them to a session whose next record number an
// intruder took (its statement breaks the records' key, which rolls the
// batch's transaction back). That call fails with the server's error;
// the three others, one an AppendAt whose fence holds, are committed
// and acknowledged, each once.
func TestS8_AFailingStatementInABatchFailsOnlyItself(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	ctx := testkit.Ctx(t)
	s, err := open(ctx, url, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	one := persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(`1`)}
	for _, id := range []string{"a", "bad", "b", "c"} {
		if _, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: id}, one); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO subactor_records (session_id, seq, kind, data, token) VALUES ('bad', 2, 'message', '2', '')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	kinds, data, _ := columns([]persistence.Record{one})
	call := func(id string, expect int64) *appendCall {
		return &appendCall{ctx: ctx, id: []byte(id), expect: expect, kinds: kinds, data: data, token: newToken(), done: make(chan error, 1)}
	}
	calls := []*appendCall{call("a", -1), call("bad", -1), call("b", 1), call("c", -1)}
	s.runBatch(slices.Clone(calls)) // it takes calls out of its slice as it answers them
	for _, c := range calls {
		err := testkit.Recv(t, c.done, "the outcome of the append to "+string(c.id))
		var pgErr *pgconn.PgError
		switch {
		case string(c.id) == "bad":
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Errorf("the append to bad: %v, want its unique violation", err)
			}
		case err != nil || c.last == nil || *c.last != 2:
			t.Errorf("the append to %s: %v, ends at %v, want acknowledged at 2", c.id, err, c.last)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, recs, err := s.Load(ctx, id); err != nil || len(recs) != 2 {
			t.Errorf("session %s holds %d records (%v), want 2", id, len(recs), err)
		}
	}
}
