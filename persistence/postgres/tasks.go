package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/internal/rules"
)

// PutTask implements persistence.TaskStore.
func (s *store) PutTask(ctx context.Context, t persistence.TaskRecord) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := rules.Task(t.ID, t.ParentSessionID, t.State, t.Result, t.UpdatedAt); err != nil {
		return err
	}
	t.UpdatedAt = t.UpdatedAt.UTC()
	body, err := jsonv2.Marshal(t)
	if err != nil {
		return fmt.Errorf("postgres: encode task: %w", err)
	}
	id, token := []byte(t.ID), newToken()
	return s.write(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO subactor_tasks (id, parent, body, token) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET parent = excluded.parent, body = excluded.body, token = excluded.token`,
			id, []byte(t.ParentSessionID), body, token)
		return err
	}, func(ctx context.Context) (bool, error) {
		return s.exists(ctx, `SELECT FROM subactor_tasks WHERE id = $1 AND token = $2`, id, token)
	})
}

// GetTask implements persistence.TaskStore. A stored task that does not
// decode is a *persistence.CorruptError (Part "task").
func (s *store) GetTask(ctx context.Context, id string) (persistence.TaskRecord, error) {
	var t persistence.TaskRecord
	err := s.read(ctx, func(ctx context.Context) error {
		var parent, body []byte
		err := s.pool.QueryRow(ctx, `SELECT parent, body FROM subactor_tasks WHERE id = $1`, []byte(id)).Scan(&parent, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", persistence.ErrTaskNotFound, id)
		} else if err != nil {
			return err
		}
		t, err = decodeTask(id, parent, body)
		return err
	})
	return t, err
}

// ListTasks implements persistence.TaskStore. A task that does not
// decode fails the call with its *persistence.CorruptError rather than
// go missing from the list; DeleteTask discards it.
func (s *store) ListTasks(ctx context.Context, parentSessionID string) ([]persistence.TaskRecord, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", persistence.ErrInvalid)
	}
	var out []persistence.TaskRecord
	err := s.read(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT id, body FROM subactor_tasks WHERE parent = $1 ORDER BY id`, []byte(parentSessionID))
		if err != nil {
			return err
		}
		defer rows.Close()
		out = nil
		for rows.Next() {
			var id, body []byte
			if err := rows.Scan(&id, &body); err != nil {
				return err
			}
			t, err := decodeTask(string(id), []byte(parentSessionID), body)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteTask implements persistence.TaskStore.
func (s *store) DeleteTask(ctx context.Context, id string) error {
	deleted, err := s.deleteRow(ctx, "subactor_tasks", id)
	if err == nil && !deleted {
		return fmt.Errorf("%w: %q", persistence.ErrTaskNotFound, id)
	}
	return err
}

// decodeTask checks a task's row: a body that decodes strictly, is a
// valid task and names the id and parent the row is stored under.
func decodeTask(id string, parent, body []byte) (persistence.TaskRecord, error) {
	corrupt := func(err error) error { return &persistence.CorruptError{TaskID: id, Part: "task", Err: err} }
	var t persistence.TaskRecord
	if err := jsonv2.Unmarshal(body, &t); err != nil {
		return persistence.TaskRecord{}, corrupt(fmt.Errorf("bad JSON: %w", err))
	}
	if err := rules.Task(t.ID, t.ParentSessionID, t.State, t.Result, t.UpdatedAt); err != nil {
		return persistence.TaskRecord{}, corrupt(rules.NotInvalid(err))
	}
	switch {
	case t.ID != id:
		return persistence.TaskRecord{}, corrupt(fmt.Errorf("names task %q", t.ID))
	case t.ParentSessionID != string(parent):
		return persistence.TaskRecord{}, corrupt(fmt.Errorf("names parent %q, stored under %q", t.ParentSessionID, parent))
	}
	return t, nil
}
