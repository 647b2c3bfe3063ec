package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/internal/rules"
	"github.com/subactor/subactor/subagent"
)

// newToken marks the rows of one write (see store.write).
func newToken() []byte {
	t := uuid.New()
	return t[:]
}

// columns splits recs into the kind and data arrays the statements take,
// or fails with ErrInvalid; the copies are what is stored, so a caller's
// later change to its records changes nothing.
func columns(recs []persistence.Record) (kinds, data [][]byte, err error) {
	kinds, data = make([][]byte, len(recs)), make([][]byte, len(recs))
	for i, r := range recs {
		if err := rules.Record(r.Kind, r.Data); err != nil {
			return nil, nil, err
		}
		kinds[i], data[i] = []byte(r.Kind), []byte(r.Data)
	}
	return kinds, data, nil
}

func notFound(id string) error { return fmt.Errorf("%w: %q", persistence.ErrNotFound, id) }

// exists reports whether query, a SELECT, finds a row.
func (s *store) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (`+query+`)`, args...).Scan(&ok)
	return ok, err
}

// Create implements persistence.Store.
func (s *store) Create(ctx context.Context, h subagent.SessionHeader) error {
	_, err := s.CreateWith(ctx, h)
	return err
}

// createSQL stores a session and its first records in one statement.
const createSQL = `
WITH s AS (
	INSERT INTO subactor_sessions (id, parent, header, last_seq, token)
	VALUES ($1, $2, $3, cardinality($4::bytea[]), $6)
	ON CONFLICT (id) DO NOTHING
	RETURNING id
), r AS (
	INSERT INTO subactor_records (session_id, seq, kind, data, token)
	SELECT s.id, k.ord, k.kind, k.data, $6
	FROM s, unnest($4::bytea[], $5::bytea[]) WITH ORDINALITY AS k(kind, data, ord)
)
SELECT count(*) FROM s`

// CreateWith implements persistence.Store.
func (s *store) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	if err := rules.Header(h); err != nil {
		return 0, err
	}
	kinds, data, err := columns(recs)
	if err != nil {
		return 0, err
	}
	header, err := jsonv2.Marshal(h)
	if err != nil {
		return 0, fmt.Errorf("postgres: encode header: %w", err)
	}
	id, token := []byte(h.SessionID), newToken()
	var created int
	err = s.write(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, createSQL, id, []byte(h.ParentSessionID), header, kinds, data, token).Scan(&created)
	}, func(ctx context.Context) (bool, error) {
		created = 1
		return s.exists(ctx, `SELECT FROM subactor_sessions WHERE id = $1 AND token = $2`, id, token)
	})
	switch {
	case err != nil:
		return 0, err
	case created == 0:
		return 0, fmt.Errorf("%w: %q", persistence.ErrExists, h.SessionID)
	}
	return uint64(len(recs)), nil
}

// appendSQL moves a session's last sequence number by the number of
// records and stores them under the numbers it moved past, in one
// statement; with $2 at -1 it appends wherever the log ends, otherwise
// only if it ends at $2. The update locks the session's row, so appends
// to one log queue in the database, and the records' key (session,
// seq) refuses any second writer of a number. No row: the session is
// missing or ends elsewhere.
const appendSQL = `
WITH s AS (
	UPDATE subactor_sessions SET last_seq = last_seq + cardinality($3::bytea[])
	WHERE id = $1 AND ($2 < 0 OR last_seq = $2)
	RETURNING last_seq
), r AS (
	INSERT INTO subactor_records (session_id, seq, kind, data, token)
	SELECT $1, s.last_seq - cardinality($3::bytea[]) + k.ord, k.kind, k.data, $5
	FROM s, unnest($3::bytea[], $4::bytea[]) WITH ORDINALITY AS k(kind, data, ord)
)
SELECT last_seq FROM s`

// Append implements persistence.Store.
func (s *store) Append(ctx context.Context, sessionID string, recs ...persistence.Record) error {
	_, err := s.appendAt(ctx, sessionID, -1, recs)
	return err
}

// AppendAt implements persistence.Store; the database enforces the
// fence (appendSQL).
func (s *store) AppendAt(ctx context.Context, sessionID string, expect uint64, recs ...persistence.Record) (uint64, error) {
	if expect > math.MaxInt64 { // no log gets there: it ends elsewhere
		last, err := s.lastSeq(ctx, sessionID)
		if err != nil {
			return 0, err
		}
		return 0, &persistence.ConflictError{SessionID: sessionID, Expected: expect, Actual: last}
	}
	return s.appendAt(ctx, sessionID, int64(expect), recs)
}

// appendAt appends recs if the log ends at expect, or wherever it ends
// for an expect of -1, and returns the new end.
func (s *store) appendAt(ctx context.Context, sessionID string, expect int64, recs []persistence.Record) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	kinds, data, err := columns(recs)
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 { // a check, not a write
		last, err := s.lastSeq(ctx, sessionID)
		if err != nil || expect < 0 || uint64(expect) == last {
			return last, err
		}
		return 0, &persistence.ConflictError{SessionID: sessionID, Expected: uint64(expect), Actual: last}
	}
	id, token := []byte(sessionID), newToken()
	var last *int64
	err = s.write(ctx, func(ctx context.Context) error {
		c := &appendCall{ctx: ctx, id: id, expect: expect, kinds: kinds, data: data, token: token}
		err := s.commitAppend(c)
		last = c.last
		return err
	}, func(ctx context.Context) (bool, error) {
		// A write's records are all there or none is; an AppendAt's
		// end is known, an Append's is not returned.
		end := expect + int64(len(recs))
		last = &end
		return s.exists(ctx, `SELECT FROM subactor_records WHERE session_id = $1 AND token = $2`, id, token)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		actual, err := s.lastSeq(ctx, sessionID)
		switch {
		case err != nil:
			return 0, err
		case expect < 0: // created since the append found no session
			return 0, notFound(sessionID)
		}
		return 0, &persistence.ConflictError{SessionID: sessionID, Expected: uint64(expect), Actual: actual}
	case err != nil:
		return 0, err
	}
	return uint64(*last), nil
}

// lastSeq returns where a log ends, or ErrNotFound.
func (s *store) lastSeq(ctx context.Context, sessionID string) (uint64, error) {
	var last int64
	err := s.read(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT last_seq FROM subactor_sessions WHERE id = $1`, []byte(sessionID)).Scan(&last)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, notFound(sessionID)
	case err != nil:
		return 0, err
	case last < 0:
		return 0, &persistence.CorruptError{SessionID: sessionID, Part: "meta", Err: fmt.Errorf("last sequence number %d", last)}
	}
	return uint64(last), nil
}

// Load implements persistence.Store.
func (s *store) Load(ctx context.Context, sessionID string) (subagent.SessionHeader, []persistence.Record, error) {
	h, entries, err := s.LoadFrom(ctx, sessionID, 0)
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	recs := make([]persistence.Record, len(entries))
	for i, e := range entries {
		recs[i] = e.Record
	}
	return h, recs, nil
}

// loadSQL reads a session's row and its records after $2 in one
// statement, so from one snapshot: the session's row first.
const loadSQL = `
SELECT header, parent, last_seq, NULL::bigint AS seq, NULL::bytea, NULL::bytea
FROM subactor_sessions WHERE id = $1
UNION ALL
SELECT NULL, NULL, NULL, seq, kind, data
FROM subactor_records WHERE session_id = $1 AND seq > $2
ORDER BY seq NULLS FIRST`

// LoadFrom implements persistence.Store. It checks what it returns: the
// header decodes and names the session, every record is valid, numbers
// rise up to the log's end and the last record is there.
func (s *store) LoadFrom(ctx context.Context, sessionID string, after uint64) (subagent.SessionHeader, []persistence.Entry, error) {
	var (
		h       subagent.SessionHeader
		entries []persistence.Entry
		last    uint64
	)
	from := int64(min(after, math.MaxInt64))
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, loadSQL, []byte(sessionID), from)
		if err != nil {
			return err
		}
		defer rows.Close()
		entries, last = nil, 0
		first := true
		for rows.Next() {
			var (
				header, parent, kind, data []byte
				lastSeq, seq               *int64
			)
			if err := rows.Scan(&header, &parent, &lastSeq, &seq, &kind, &data); err != nil {
				return err
			}
			if first {
				first = false
				if h, last, err = decodeSession(sessionID, header, parent, lastSeq); err != nil {
					return err
				}
				continue
			}
			if seq == nil || *seq <= from || uint64(*seq) > last {
				return &persistence.CorruptError{SessionID: sessionID, Part: "layout", Err: fmt.Errorf("a record stored past the log's end at %d", last)}
			}
			if err := rules.Record(string(kind), data); err != nil {
				return &persistence.CorruptError{SessionID: sessionID, Part: "record", Seq: uint64(*seq), Err: rules.NotInvalid(err)}
			}
			entries = append(entries, persistence.Entry{Seq: uint64(*seq), Record: persistence.Record{Kind: string(kind), Data: data}})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if first {
			return notFound(sessionID)
		}
		if end := len(entries); last > after && (end == 0 || entries[end-1].Seq != last) {
			return &persistence.CorruptError{SessionID: sessionID, Part: "record", Seq: last, Err: errors.New("missing (the log ends there)")}
		}
		return nil
	})
	if err != nil {
		return subagent.SessionHeader{}, nil, err
	}
	return h, entries, nil
}

// decodeSession checks a session's row: a header that decodes, is valid
// and names the session and the parent the row is listed under, and an
// end that is not negative.
func decodeSession(id string, header, parent []byte, lastSeq *int64) (subagent.SessionHeader, uint64, error) {
	corrupt := func(part string, err error) error {
		return &persistence.CorruptError{SessionID: id, Part: part, Err: err}
	}
	var h subagent.SessionHeader
	switch err := jsonv2.Unmarshal(header, &h); {
	case err != nil:
		return h, 0, corrupt("header", fmt.Errorf("bad JSON: %w", err))
	case rules.Header(h) != nil:
		return h, 0, corrupt("header", rules.NotInvalid(rules.Header(h)))
	case h.SessionID != id:
		return h, 0, corrupt("header", fmt.Errorf("names session %q", h.SessionID))
	case h.ParentSessionID != string(parent):
		return h, 0, corrupt("header", fmt.Errorf("names parent %q, listed under %q", h.ParentSessionID, parent))
	case lastSeq == nil || *lastSeq < 0:
		return h, 0, corrupt("meta", errors.New("no last sequence number"))
	}
	return h, uint64(*lastSeq), nil
}

// Header implements persistence.Store.
func (s *store) Header(ctx context.Context, sessionID string) (subagent.SessionHeader, error) {
	var h subagent.SessionHeader
	err := s.read(ctx, func(ctx context.Context) error {
		var header, parent []byte
		var last *int64
		err := s.pool.QueryRow(ctx, `SELECT header, parent, last_seq FROM subactor_sessions WHERE id = $1`, []byte(sessionID)).Scan(&header, &parent, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(sessionID)
		} else if err != nil {
			return err
		}
		h, _, err = decodeSession(sessionID, header, parent, last)
		return err
	})
	return h, err
}

// Sessions implements persistence.Store.
func (s *store) Sessions(ctx context.Context) ([]persistence.SessionInfo, error) {
	return s.list(ctx, `SELECT id, header, parent, last_seq FROM subactor_sessions ORDER BY created`)
}

// Children implements persistence.Store.
func (s *store) Children(ctx context.Context, parentSessionID string) ([]persistence.SessionInfo, error) {
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", persistence.ErrInvalid)
	}
	return s.list(ctx, `SELECT id, header, parent, last_seq FROM subactor_sessions WHERE parent = $1 ORDER BY created`, []byte(parentSessionID))
}

// list reads sessions with query, checking each.
func (s *store) list(ctx context.Context, query string, args ...any) ([]persistence.SessionInfo, error) {
	var infos []persistence.SessionInfo
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		infos = nil
		for rows.Next() {
			var id, header, parent []byte
			var last *int64
			if err := rows.Scan(&id, &header, &parent, &last); err != nil {
				return err
			}
			h, lastSeq, err := decodeSession(string(id), header, parent, last)
			if err != nil {
				return err
			}
			infos = append(infos, persistence.SessionInfo{Header: h, LastSeq: lastSeq})
		}
		return rows.Err()
	})
	return infos, err
}

// Compact implements persistence.Store, in one transaction that locks
// the session's row first.
func (s *store) Compact(ctx context.Context, sessionID string, upTo uint64, summary persistence.Record) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	kinds, data, err := columns([]persistence.Record{summary})
	if err != nil {
		return err
	}
	id, token := []byte(sessionID), newToken()
	return s.write(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var last int64
			err := tx.QueryRow(ctx, `SELECT last_seq FROM subactor_sessions WHERE id = $1 FOR UPDATE`, id).Scan(&last)
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound(sessionID)
			} else if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT seq, kind FROM subactor_records WHERE session_id = $1 AND seq <= $2 ORDER BY seq`, id, int64(min(upTo, math.MaxInt64)))
			if err != nil {
				return err
			}
			type row struct {
				seq  int64
				kind []byte
			}
			var stored []row
			var r row
			if _, err := pgx.ForEachRow(rows, []any{&r.seq, &r.kind}, func() error {
				stored = append(stored, r)
				return nil
			}); err != nil {
				return err
			}
			removed, err := rules.Compact(func(yield func(uint64, string) bool) {
				for _, r := range stored {
					if !yield(uint64(r.seq), string(r.kind)) {
						return
					}
				}
			}, uint64(max(last, 0)), upTo)
			if err != nil {
				return err
			}
			at := removed[len(removed)-1]
			if _, err := tx.Exec(ctx, `DELETE FROM subactor_records WHERE session_id = $1 AND seq = ANY($2)`, id, removed); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO subactor_records (session_id, seq, kind, data, token) VALUES ($1, $2, $3, $4, $5)`, id, int64(at), kinds[0], data[0], token)
			return err
		})
	}, func(ctx context.Context) (bool, error) {
		return s.exists(ctx, `SELECT FROM subactor_records WHERE session_id = $1 AND token = $2`, id, token)
	})
}

// Delete implements persistence.Store; the session's records go with
// its row.
func (s *store) Delete(ctx context.Context, sessionID string) error {
	deleted, err := s.deleteRow(ctx, "subactor_sessions", sessionID)
	if err == nil && !deleted {
		return notFound(sessionID)
	}
	return err
}

// deleteRow deletes the row of table with id and reports whether there
// was one. In doubt, a row that is gone was deleted.
func (s *store) deleteRow(ctx context.Context, table, id string) (bool, error) {
	key := []byte(id)
	var deleted int64
	err := s.write(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE id = $1`, key)
		deleted = tag.RowsAffected()
		return err
	}, func(ctx context.Context) (bool, error) {
		there, err := s.exists(ctx, `SELECT FROM `+table+` WHERE id = $1`, key)
		deleted = 1
		return !there, err
	})
	return deleted > 0, err
}
