package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/persistence/internal/rules"
)

// PutTask implements TaskStore. Task ids longer than bbolt's maximum key
// size (32 KiB) are ErrInvalid.
func (b *boltStore) PutTask(ctx context.Context, t TaskRecord) error {
	if err := b.enterWrite(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	if err := validateTask(t); err != nil {
		return err
	}
	if len(t.ID) > bolt.MaxKeySize {
		return fmt.Errorf("%w: task id longer than %d bytes", ErrInvalid, bolt.MaxKeySize)
	}
	t.UpdatedAt = t.UpdatedAt.UTC()
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("persistence: encode task: %w", err)
	}
	val := frame(body)
	return b.update(ctx, func(tx *bolt.Tx) error {
		tasks, err := topBucket(tx, tasksBucket)
		if err != nil {
			return err
		}
		return tasks.Put([]byte(t.ID), val)
	})
}

// GetTask implements TaskStore. A stored task that does not decode is a
// *CorruptError (Part "task").
func (b *boltStore) GetTask(ctx context.Context, id string) (TaskRecord, error) {
	if err := b.enter(ctx); err != nil {
		return TaskRecord{}, err
	}
	defer b.mu.RUnlock()
	var t TaskRecord
	err := b.viewTasks(func(tasks *bolt.Bucket) error {
		v := tasks.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%w: %q", ErrTaskNotFound, id)
		}
		var err error
		t, err = decodeTask(id, v)
		return err
	})
	return t, err // decodeTask returns no task with an error
}

// ListTasks implements TaskStore. It decodes every task to find the
// parent's: tasks are few (one per background delegation) and a parent
// index would be one more thing to keep in step on every PutTask. A task
// that does not decode fails the call with its *CorruptError rather than
// go missing from the list; DeleteTask discards it.
func (b *boltStore) ListTasks(ctx context.Context, parentSessionID string) ([]TaskRecord, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	if parentSessionID == "" {
		return nil, fmt.Errorf("%w: empty parent session id", ErrInvalid)
	}
	var out []TaskRecord
	err := b.viewTasks(func(tasks *bolt.Bucket) error {
		c := tasks.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			t, err := decodeTask(string(k), v)
			if err != nil {
				return err
			}
			if t.ParentSessionID == parentSessionID {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTask implements TaskStore. It deletes a task whether or not it
// decodes.
func (b *boltStore) DeleteTask(ctx context.Context, id string) error {
	if err := b.enterWrite(ctx); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	return b.update(ctx, func(tx *bolt.Tx) error {
		tasks, err := topBucket(tx, tasksBucket)
		if err != nil {
			return err
		}
		key := []byte(id)
		switch {
		case tasks.Bucket(key) != nil:
			return tasks.DeleteBucket(key)
		case has(tasks, key):
			return tasks.Delete(key)
		}
		return fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	})
}

// viewTasks runs fn on the "tasks" bucket in a read-only transaction.
func (b *boltStore) viewTasks(fn func(tasks *bolt.Bucket) error) error {
	return b.view("", func(tx *bolt.Tx) error {
		tasks, err := topBucket(tx, tasksBucket)
		if err != nil {
			return err
		}
		return fn(tasks)
	})
}

// decodeTask decodes the value stored under id; v is nil for a nested
// bucket, which the store never writes.
func decodeTask(id string, v []byte) (TaskRecord, error) {
	corrupt := func(err error) error { return &CorruptError{TaskID: id, Part: "task", Err: err} }
	if v == nil {
		return TaskRecord{}, corrupt(errors.New("a bucket is stored where the task belongs"))
	}
	var t TaskRecord
	if err := decodeJSON(v, &t); err != nil {
		return TaskRecord{}, corrupt(err)
	}
	if err := validateTask(t); err != nil {
		return TaskRecord{}, corrupt(rules.NotInvalid(err))
	}
	if t.ID != id {
		return TaskRecord{}, corrupt(fmt.Errorf("names task %q", t.ID))
	}
	return t, nil
}
