// Package memtest measures the memory a test's code holds, for the tests
// that bound it (K3).
package memtest

import (
	"runtime"
	"sync"
	"time"
)

// HeapPeak samples the heap until stop is called, which returns the
// highest value seen. Sampling is measurement, not synchronisation: a
// missed peak can only make the figure lower, so a test's ceiling must be
// far from what the unbounded behaviour it guards against reaches.
func HeapPeak() (stop func() uint64) {
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}
