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
	Writers          int     `json:"writers"`
	AppendsPerSecond float64 `json:"appendsPerSecond"`
}

// record is a 512-byte turn, about a short message.
var record = persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(`"` + strings.Repeat("x", 510) + `"`)}

// BoltAppends makes total appends of 512-byte records to a fresh bbolt
// store in dir from writers goroutines. With one writer every append is its
// own fsync; with many, appends that arrive during a commit share the next
// one (group commit).
func BoltAppends(ctx context.Context, dir string, writers, total int) (AppendRate, error) {
	store, err := persistence.OpenBolt(filepath.Join(dir, fmt.Sprintf("appends-%d.db", writers)))
	if err != nil {
		return AppendRate{}, err
	}
	defer store.Close()
	for w := range writers {
		if err := store.Create(ctx, subagent.SessionHeader{SessionID: fmt.Sprint("w", w)}); err != nil {
			return AppendRate{}, err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	began := time.Now()
	for w := range writers {
		wg.Go(func() {
			for range total / writers {
				if err := store.Append(ctx, fmt.Sprint("w", w), record); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return AppendRate{}, err
	}
	return AppendRate{Writers: writers, AppendsPerSecond: float64(total/writers*writers) / time.Since(began).Seconds()}, nil
}
