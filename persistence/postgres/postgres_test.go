package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/pgtest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/persistencetest"
	"github.com/subactor/subactor/persistence/postgres"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a store on url, closed when t ends.
func open(t *testing.T, url string) persistence.Backend {
	t.Helper()
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPostgresConformance runs the session-log suite (its
// AppendAtFencesALateWriter and AppendAtConcurrentOneWinnerPerSeq cases
// check S8's one writer per log, D4_CompactKeepsLogOnlyRecords checks
// D4) on PostgreSQL, each case in an empty schema of one server.
func TestPostgresConformance(t *testing.T) {
	srv := pgtest.Start(t)
	persistencetest.Run(t, func(t *testing.T) persistence.Store { return open(t, srv.Fresh(t)) })
}

func TestPostgresTaskConformance(t *testing.T) {
	srv := pgtest.Start(t)
	persistencetest.RunTasks(t, func(t *testing.T) persistence.TaskStore { return open(t, srv.Fresh(t)) })
}

type mark struct {
	Writer int `json:"w"`
	N      int `json:"n"`
}

// TestS9_ServerRestartMidAppendsKeepsEveryAcknowledgedAppendOnce crashes
// the server (pg_ctl stop -m immediate: connections cut, nothing flushed
// but the WAL) while writers append, and brings it back. Each writer
// appends its records in order, each until it is acknowledged. Afterwards
// the log holds every record exactly once, in each writer's order: an
// acknowledged append was committed, and one the store failed (or
// retried) after the cut was absent, never stored twice.
func TestS9_ServerRestartMidAppendsKeepsEveryAcknowledgedAppendOnce(t *testing.T) {
	srv := pgtest.Start(t)
	s := open(t, srv.Fresh(t))
	ctx := testkit.Ctx(t)
	if err := s.Create(ctx, subagent.SessionHeader{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 60
	acked := make(chan struct{}, writers*each)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range each {
				data, _ := json.Marshal(mark{w, n})
				for {
					err := s.Append(ctx, "s", persistence.Record{Kind: "message", Data: data})
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					failed.Add(1) // failed, so absent: try it again
				}
				acked <- struct{}{}
			}
		})
	}
	// Crash once a quarter of the appends are in, so that writes are in
	// flight when the connections drop.
	for range writers * each / 4 {
		testkit.Recv(t, acked, "an acknowledged append before the crash")
	}
	srv.Stop(t)
	srv.Restart(t)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the writers did not finish: %v", ctx.Err())
	}
	_, recs, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	for i, r := range recs {
		var m mark
		if err := json.Unmarshal(r.Data, &m); err != nil || m.Writer < 0 || m.Writer >= writers {
			t.Fatalf("record %d: %s, %v", i+1, r.Data, err)
		}
		if m.N != next[m.Writer] {
			t.Fatalf("record %d: writer %d's record %d, want its record %d (stored twice or lost)", i+1, m.Writer, m.N, next[m.Writer])
		}
		next[m.Writer]++
	}
	if len(recs) != writers*each {
		t.Fatalf("%d records, want %d", len(recs), writers*each)
	}
	t.Logf("%d appends failed during the restart and were tried again", failed.Load())
}

// TestS8_TwoNodesRacingAppendAtOneWinnerPerSeq gives two stores (two
// pools, as two nodes would have) on one database four writers each,
// all extending one log with AppendAt from where they last saw it end.
// Each sequence number has exactly one winner; every loser gets a
// *ConflictError saying where the log really ends, and the log holds the
// winners' records in order.
func TestS8_TwoNodesRacingAppendAtOneWinnerPerSeq(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	nodes := []persistence.Backend{open(t, url), open(t, url)}
	ctx := testkit.Ctx(t)
	if err := nodes[0].Create(ctx, subagent.SessionHeader{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	const perNode, end = 4, 120
	var (
		mu        sync.Mutex
		winner    = map[uint64]int{}
		conflicts int
		wg        sync.WaitGroup
	)
	for w := range len(nodes) * perNode {
		store := nodes[w%len(nodes)]
		wg.Go(func() {
			var expect uint64
			for expect < end {
				data, _ := json.Marshal(mark{Writer: w, N: int(expect + 1)})
				got, err := store.AppendAt(ctx, "s", expect, persistence.Record{Kind: "message", Data: data})
				var conflict *persistence.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					if prev, ok := winner[got]; ok || got != expect+1 {
						t.Errorf("writer %d won record %d (expected %d), already won by %d: %v", w, got, expect+1, prev, ok)
					}
					winner[got] = w
					mu.Unlock()
					expect = got
				case errors.As(err, &conflict):
					if conflict.Actual <= expect {
						t.Errorf("writer %d: conflict at %d, not past its expected %d", w, conflict.Actual, expect)
						return
					}
					mu.Lock()
					conflicts++
					mu.Unlock()
					expect = conflict.Actual
				default:
					t.Errorf("writer %d: AppendAt(%d): %v", w, expect, err)
					return
				}
			}
		})
	}
	wg.Wait()
	_, recs, err := nodes[1].Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < end || len(winner) != len(recs) {
		t.Fatalf("%d records, %d winners, want at least %d and as many winners", len(recs), len(winner), end)
	}
	for i, r := range recs {
		var m mark
		if err := json.Unmarshal(r.Data, &m); err != nil || m.N != i+1 || m.Writer != winner[uint64(i+1)] {
			t.Fatalf("record %d is %s, want writer %d's", i+1, r.Data, winner[uint64(i+1)])
		}
	}
	if conflicts == 0 {
		t.Fatal("no writer ever lost a race: the test raced nothing")
	}
}

// exec runs SQL on the database at url as an operator (or an attacker)
// would, beside the store.
func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestPostgresRefusesANewerSchema: a database a newer release migrated
// is refused with an error saying so, naming both versions, and left as
// it is.
func TestPostgresRefusesANewerSchema(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	open(t, url).Close()
	exec(t, url, `INSERT INTO subactor_schema (version) VALUES (2)`)
	s, err := postgres.Open(t.Context(), url)
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "schema is newer than this binary knows: it is at version 2, this binary knows up to 1") {
		t.Fatalf("Open of a version 2 schema: %v, want the newer schema's error", err)
	}
	t.Log(err)
	// Opening twice at version 1 migrates nothing again.
	exec(t, url, `DELETE FROM subactor_schema WHERE version = 2`)
	open(t, url)
	open(t, url)
}

// TestK3_PostgresHostileRowsAreCorrupt writes rows the store would never
// write, as someone with the database's password could: each read of
// the damaged session fails with a *CorruptError naming it and the part,
// and the other session stays readable and writable.
func TestK3_PostgresHostileRowsAreCorrupt(t *testing.T) {
	srv := pgtest.Start(t)
	for _, c := range []struct {
		name, part, sql string
	}{
		{"header not JSON", "header", `UPDATE subactor_sessions SET header = '\x7b' WHERE id = 'bad'`},
		{"header names another session", "header", `UPDATE subactor_sessions SET header = convert_to('{"sessionId":"other"}', 'UTF8') WHERE id = 'bad'`},
		{"header with an unknown field", "header", `UPDATE subactor_sessions SET header = convert_to('{"sessionId":"bad","x":1}', 'UTF8') WHERE id = 'bad'`},
		{"record data not JSON", "record", `UPDATE subactor_records SET data = '\x7b' WHERE session_id = 'bad'`},
		{"record without kind", "record", `UPDATE subactor_records SET kind = '' WHERE session_id = 'bad'`},
		{"last record missing", "record", `DELETE FROM subactor_records WHERE session_id = 'bad'`},
		{"record past the end", "layout", `UPDATE subactor_sessions SET last_seq = 0 WHERE id = 'bad'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := srv.Fresh(t)
			s := open(t, url)
			ctx := testkit.Ctx(t) // a read that took its decoding error for a lost connection would retry past it
			for _, id := range []string{"good", "bad"} {
				if _, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: id}, persistence.Record{Kind: "message", Data: json.RawMessage(`1`)}); err != nil {
					t.Fatal(err)
				}
			}
			exec(t, url, c.sql)
			_, _, err := s.Load(ctx, "bad")
			var corrupt *persistence.CorruptError
			if !errors.As(err, &corrupt) || corrupt.SessionID != "bad" || corrupt.Part != c.part {
				t.Fatalf("Load: %v, want a corrupt %s of session bad", err, c.part)
			}
			if err := s.Append(ctx, "good", persistence.Record{Kind: "message", Data: json.RawMessage(`2`)}); err != nil {
				t.Fatal(err)
			}
			if _, recs, err := s.Load(ctx, "good"); err != nil || len(recs) != 2 {
				t.Fatalf("the other session: %d records, %v", len(recs), err)
			}
		})
	}
	t.Run("task", func(t *testing.T) {
		url := srv.Fresh(t)
		s := open(t, url)
		if err := s.PutTask(t.Context(), persistence.TaskRecord{ID: "t", ParentSessionID: "p", State: "done"}); err != nil {
			t.Fatal(err)
		}
		exec(t, url, `UPDATE subactor_tasks SET body = convert_to('{"id":"u","parentSessionId":"p","state":"done"}', 'UTF8')`)
		_, err := s.GetTask(t.Context(), "t")
		var corrupt *persistence.CorruptError
		if !errors.As(err, &corrupt) || corrupt.TaskID != "t" {
			t.Fatalf("GetTask: %v, want the task corrupt", err)
		}
	})
}

// TestS9_ConcurrentAppendsToManySessionsAreAcknowledgedOnce has 96
// writers, two per session, append at once, so that the store batches
// appends of many callers into one transaction and queues a session's
// second append for the next. Every append is acknowledged and, after
// reopening, present exactly once, in its writer's order; each session
// ends where its two writers' appends take it.
func TestS9_ConcurrentAppendsToManySessionsAreAcknowledgedOnce(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.Fresh(t)
	s := open(t, url)
	ctx := testkit.Ctx(t)
	const sessions, perSession, each = 48, 2, 20
	for i := range sessions {
		if err := s.Create(ctx, subagent.SessionHeader{SessionID: fmt.Sprint("s", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range sessions * perSession {
		wg.Go(func() {
			id := fmt.Sprint("s", w%sessions)
			for n := range each {
				data, _ := json.Marshal(mark{w, n})
				if err := s.Append(ctx, id, persistence.Record{Kind: "message", Data: data}); err != nil {
					t.Errorf("writer %d, append %d to %s: %v", w, n, id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	s.Close()
	s = open(t, url)
	for i := range sessions {
		id := fmt.Sprint("s", i)
		_, recs, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next := map[int]int{}
		for j, r := range recs {
			var m mark
			if err := json.Unmarshal(r.Data, &m); err != nil || m.Writer%sessions != i || m.N != next[m.Writer] {
				t.Fatalf("%s record %d: %s, want the next of one of its writers' (%v): stored twice, lost or misplaced", id, j+1, r.Data, next)
			}
			next[m.Writer]++
		}
		if len(recs) != perSession*each {
			t.Fatalf("%s holds %d records, want %d", id, len(recs), perSession*each)
		}
	}
}
