package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// ScaleResult is what n live children parked on their model cost one node.
type ScaleResult struct {
	Children int `json:"children"`
	// RSSBytesPerChild is the growth of the process's resident memory
	// from before the first start until all are parked, with no forced
	// collection in between (the heap's pages returned to the system
	// before), per child.
	RSSBytesPerChild   float64 `json:"rssBytesPerChild"`
	HeapBytesPerChild  float64 `json:"heapBytesPerChild"`
	StackBytesPerChild float64 `json:"stackBytesPerChild"`
	GoroutinesPerChild float64 `json:"goroutinesPerChild"`
	StartsPerSecond    float64 `json:"startsPerSecond"`
	DisposeAllSeconds  float64 `json:"disposeAllSeconds"`
}

// gate is a parked model that counts the children waiting in it.
type gate struct {
	waiting atomic.Int64
	all     chan struct{} // closed when waiting reaches n
	n       int64
}

func (g *gate) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	if g.waiting.Add(1) == g.n {
		close(g.all)
	}
	<-ctx.Done()
	return agent.Response{}, ctx.Err()
}

// Scale starts n children through the Service, each parked on its model,
// with sessions in memory, measures heap, stack and goroutines per live
// child once all are parked, then disposes them all.
func Scale(ctx context.Context, n int) (ScaleResult, error) {
	return ScaleOn(ctx, n, persistence.NewMemory())
}

// ScaleOn is Scale with the sessions in store.
func ScaleOn(ctx context.Context, n int, store persistence.Store) (ScaleResult, error) {
	g := &gate{all: make(chan struct{}), n: int64(n)}
	s, err := newSeamWith(ctx, spawn.Config{Model: g, Store: store})
	if err != nil {
		return ScaleResult{}, err
	}
	defer s.close()
	var before, after runtime.MemStats
	// Twice: what the first collection's finalizers free goes in the second.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	debug.FreeOSMemory()
	rss, err := residentBytes("self")
	if err != nil {
		return ScaleResult{}, err
	}

	runs := make([]subagent.Run, 0, n)
	defer func() {
		for _, r := range runs {
			_ = r.Dispose(ctx)
		}
	}()
	began := time.Now()
	for range n {
		r, err := s.start(ctx, "wait")
		if err != nil {
			return ScaleResult{}, fmt.Errorf("start child %d: %w", len(runs), err)
		}
		runs = append(runs, r)
	}
	started := time.Since(began)
	<-g.all
	grown, err := residentBytes("self")
	if err != nil {
		return ScaleResult{}, err
	}
	// Twice as before; and a collection halves a goroutine's stack at
	// most once, while a parked child in a long-lived process sees many.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	res := ScaleResult{
		Children:           n,
		RSSBytesPerChild:   float64(grown-rss) / float64(n),
		HeapBytesPerChild:  float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		StackBytesPerChild: float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n),
		GoroutinesPerChild: float64(runtime.NumGoroutine()-goroutines) / float64(n),
		StartsPerSecond:    float64(n) / started.Seconds(),
	}
	began = time.Now()
	for _, r := range runs {
		if err := r.Dispose(ctx); err != nil {
			return res, err
		}
	}
	res.DisposeAllSeconds = time.Since(began).Seconds()
	runs = nil
	return res, nil
}

// residentBytes is a process's resident memory (/proc/PID/statm; pid
// "self" for this one).
func residentBytes(pid string) (int64, error) {
	statm, err := os.ReadFile("/proc/" + pid + "/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(statm))
	if len(f) < 2 {
		return 0, fmt.Errorf("unreadable /proc/%s/statm: %q", pid, statm)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()), err
}
