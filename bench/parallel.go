package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// ParallelResult is delegation throughput with parents delegating at once
// on one Service, each parent one goroutine running start → result →
// dispose of a scripted child in a loop.
type ParallelResult struct {
	Parents int `json:"parents"`
	// DelegationsPerSecond is the median over rounds.
	DelegationsPerSecond float64 `json:"delegationsPerSecond"`
	// Speedup is the median over rounds of this round's throughput ÷ the
	// same round's single-parent throughput.
	Speedup float64 `json:"speedup"`
	// Start is Service.Start until the child is published, over every
	// delegation of every round.
	Start Distribution `json:"start"`
}

// Parallel measures each parent count for dur per round, rounds times,
// the counts interleaved within each round so that whatever else the
// machine does weighs on all alike.
func Parallel(ctx context.Context, parents []int, rounds int, dur time.Duration) ([]ParallelResult, error) {
	return ParallelOn(ctx, persistence.NewMemory(), parents, rounds, dur)
}

// ParallelOn is Parallel with the sessions in store.
func ParallelOn(ctx context.Context, store persistence.Store, parents []int, rounds int, dur time.Duration) ([]ParallelResult, error) {
	s, err := newSeamWith(ctx, spawn.Config{Model: scripted.New(), Store: store})
	if err != nil {
		return nil, err
	}
	defer s.close()
	maxParents := 0
	for _, p := range parents {
		maxParents = max(maxParents, p)
	}
	agents := make([]*agent.Agent, maxParents)
	for i := range agents {
		if agents[i], err = agent.New(ctx, agent.Config{Store: s.store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: fmt.Sprint("parallel-parent-", i)}}); err != nil {
			return nil, err
		}
		defer agents[i].Close()
	}
	rates := make([][]float64, len(parents))
	starts := make([][]time.Duration, len(parents))
	for range rounds {
		for i, p := range parents {
			// From a collected heap: a collection the previous count left
			// under way is not charged to this one.
			runtime.GC()
			n, st, err := parallelRound(ctx, s, agents[:p], dur)
			if err != nil {
				return nil, err
			}
			rates[i] = append(rates[i], float64(n)/dur.Seconds())
			starts[i] = append(starts[i], st...)
		}
	}
	out := make([]ParallelResult, len(parents))
	for i, p := range parents {
		speedups := make([]float64, rounds)
		for r := range rounds {
			speedups[r] = rates[i][r] / rates[0][r]
		}
		out[i] = ParallelResult{Parents: p, DelegationsPerSecond: Median(rates[i]), Speedup: Median(speedups), Start: distribution(starts[i])}
	}
	return out, nil
}

// parallelRound has each parent delegate in a loop until dur has passed
// and returns the delegations completed and their start latencies.
func parallelRound(ctx context.Context, s *seam, parents []*agent.Agent, dur time.Duration) (int, []time.Duration, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		starts []time.Duration
		first  error
	)
	prompt := []subagent.ContentBlock{subagent.Text("echo hi")}
	deadline := time.Now().Add(dur)
	ready := make(chan struct{})
	for _, p := range parents {
		wg.Go(func() {
			var mine []time.Duration
			var err error
			<-ready
			for err == nil && time.Now().Before(deadline) {
				t := time.Now()
				var run subagent.Run
				run, err = s.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: p, Prompt: prompt})
				if err != nil {
					break
				}
				mine = append(mine, time.Since(t))
				var res subagent.Result
				res, err = run.Wait(ctx)
				if err == nil && subagent.TextOf(res.Output) != "hi" {
					err = errAnswer
				}
				if derr := run.Dispose(ctx); err == nil {
					err = derr
				}
			}
			mu.Lock()
			starts = append(starts, mine...)
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	close(ready)
	wg.Wait()
	return len(starts), starts, first
}
