package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/subactor/subactor/subagent"
)

// RemoteMemoryResult is a hosting node's resident memory (a remotehost
// process, its runs in-process echo children: no agent process) under
// remote runs in flight, and once they were all disposed.
//
// What holds the memory after (2,000 runs, 2026-12-05): the goroutines
// are back to what they were, but the Go heap in use is ~15 MB above,
// and a heap profile of the host put 15.3 MB of it in one buffer, the
// mailbox queue of protoactor remote's endpoint writer toward the caller
// (goring, which grows to the largest burst it held and never shrinks):
// bounded by the peak of messages in flight to one peer, not by the runs
// ever hosted. The rest of the gap is memory the Go runtime freed and
// returns to the system gradually (FreedBytes shows it given back).
type RemoteMemoryResult struct {
	Runs int `json:"runs"`
	// BeforeBytes is the host's resident memory after a warm-up, before
	// the load; LoadedBytes with Runs runs in flight; AfterBytes
	// RemoteSettle after the last of them was disposed.
	BeforeBytes int64 `json:"beforeBytes"`
	LoadedBytes int64 `json:"loadedBytes"`
	AfterBytes  int64 `json:"afterBytes"`
	// BytesPerRun is (LoadedBytes - BeforeBytes) / Runs.
	BytesPerRun float64 `json:"bytesPerRun"`
	// AfterRatio is AfterBytes / BeforeBytes (the goal: at most 1.2).
	AfterRatio float64 `json:"afterRatio"`
	// What holds the memory after: the host's Go heap in use after a
	// collection and its goroutines, before the load and after it, and
	// its resident memory once it returned its freed memory to the
	// system (debug.FreeOSMemory).
	BeforeHeap       int64 `json:"beforeHeap"`
	AfterHeap        int64 `json:"afterHeap"`
	BeforeGoroutines int   `json:"beforeGoroutines"`
	AfterGoroutines  int   `json:"afterGoroutines"`
	FreedBytes       int64 `json:"freedBytes"`
}

// RemoteSettle is how long after the load the host's memory is read: the
// Go runtime gives freed memory back to the system in the background.
const RemoteSettle = 10 * time.Second

// RemoteMemory starts runs waiting runs on one remotehost (hostBin) from
// a caller in this process, then disposes them all, reading the host's
// resident memory before, under and after the load.
func RemoteMemory(ctx context.Context, hostBin string, runs int) (RemoteMemoryResult, error) {
	res := RemoteMemoryResult{Runs: runs}
	c, err := startRemoteCluster(ctx, hostBin, 1)
	if err != nil {
		return res, err
	}
	defer c.close()
	pid, ask := strconv.Itoa(c.pids[0]), c.asks[0]
	heap := func(bytes *int64, goroutines *int) error {
		a, err := ask("heap")
		if err == nil {
			_, err = fmt.Sscanf(a, "heap %d %d", bytes, goroutines)
		}
		return err
	}
	start := func(prompt string) (subagent.Run, error) {
		return c.svc.Start(ctx, "echo", subagent.StartRequest{Parent: benchParent{}, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}})
	}
	for range 50 { // warm-up: the connections, the host's first runs
		r, err := start("hi")
		if err != nil {
			return res, err
		}
		_, err = r.Wait(ctx)
		if derr := r.Dispose(ctx); err == nil {
			err = derr
		}
		if err != nil {
			return res, err
		}
	}
	if err := heap(&res.BeforeHeap, &res.BeforeGoroutines); err != nil {
		return res, err
	}
	if res.BeforeBytes, err = residentBytes(pid); err != nil {
		return res, err
	}
	inFlight := make([]subagent.Run, 0, runs)
	defer func() {
		for _, r := range inFlight {
			_ = r.Dispose(ctx)
		}
	}()
	for range runs {
		r, err := start("wait")
		if err != nil {
			return res, fmt.Errorf("remote run %d: %w", len(inFlight), err)
		}
		inFlight = append(inFlight, r)
	}
	if res.LoadedBytes, err = residentBytes(pid); err != nil {
		return res, err
	}
	// Dispose returns once the host reported the run quiesced.
	for _, r := range inFlight {
		if err := r.Dispose(ctx); err != nil {
			return res, err
		}
	}
	inFlight = nil
	select {
	case <-time.After(RemoteSettle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if res.AfterBytes, err = residentBytes(pid); err != nil {
		return res, err
	}
	if err := heap(&res.AfterHeap, &res.AfterGoroutines); err != nil {
		return res, err
	}
	if _, err := ask("free"); err != nil {
		return res, err
	}
	if res.FreedBytes, err = residentBytes(pid); err != nil {
		return res, err
	}
	res.BytesPerRun = float64(res.LoadedBytes-res.BeforeBytes) / float64(runs)
	res.AfterRatio = float64(res.AfterBytes) / float64(res.BeforeBytes)
	return res, nil
}
