package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// AppendRate is fsynced session appends per second with writers appending
// at once, each to a session of its own.
type AppendRate struct {
	Writers int `json:"writers"`
	// GroupCommit says whether concurrent appends could share a commit.
	GroupCommit      bool         `json:"groupCommit"`
	Appends          int          `json:"appends"`
	AppendsPerSecond float64      `json:"appendsPerSecond"`
	Latency          Distribution `json:"latency"`
}

// record is a 512-byte turn, about a short message.
var record = persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(`"` + strings.Repeat("x", 510) + `"`)}

// BoltAppends appends 512-byte records to a fresh bbolt store in dir from
// writers goroutines, each to its own session, for dur (see Appends).
func BoltAppends(ctx context.Context, dir string, writers int, group bool, dur time.Duration) (AppendRate, error) {
	store, err := persistence.OpenBolt(filepath.Join(dir, fmt.Sprintf("appends-%d-%v.db", writers, group)))
	if err != nil {
		return AppendRate{}, err
	}
	defer store.Close()
	return Appends(ctx, store, writers, group, dur)
}

// Appends appends 512-byte records to store, empty, from writers
// goroutines, each to its own session, for dur. With group commit
// appends that arrive during a commit share the next one (the bbolt store
// batches concurrent Appends; PostgreSQL flushes the WAL of every commit
// waiting when one flushes). Without it every append commits and fsyncs
// alone: the stores offer no switch for that, so the writers take turns
// through a mutex, which makes every Append a lone one, and a lone Append
// is exactly a commit of its own.
func Appends(ctx context.Context, store persistence.Store, writers int, group bool, dur time.Duration) (AppendRate, error) {
	// Each writer's session is created and appended to once before the
	// clock starts, all at once, so that a store's connections (or
	// file) are ready as in a process that has been running.
	var warm sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		warm.Go(func() {
			_, err := store.CreateWith(ctx, subagent.SessionHeader{SessionID: fmt.Sprint("w", w)}, record)
			errs <- err
		})
	}
	warm.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return AppendRate{}, err
		}
	}
	var (
		wg    sync.WaitGroup
		turns sync.Mutex // held across an append when there is no group commit
		mu    sync.Mutex
		lat   []time.Duration
		first error
	)
	began := time.Now()
	deadline := began.Add(dur)
	for w := range writers {
		wg.Go(func() {
			var mine []time.Duration
			var err error
			for err == nil && time.Now().Before(deadline) {
				t := time.Now()
				if !group {
					turns.Lock()
				}
				err = store.Append(ctx, fmt.Sprint("w", w), record)
				if !group {
					turns.Unlock()
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if first != nil {
		return AppendRate{}, first
	}
	return AppendRate{Writers: writers, GroupCommit: group, Appends: len(lat), AppendsPerSecond: float64(len(lat)) / elapsed.Seconds(), Latency: distribution(lat)}, nil
}
