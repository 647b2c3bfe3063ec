package testkit

import (
	"runtime"
	"time"
)

// HeapPeak samples the heap until stop is called, which returns the
// highest value seen. Sampling is measurement, not synchronisation: a
// missed peak can only make the figure lower, so a test's ceiling must be
// far from what the unbounded behaviour it guards against reaches.
func HeapPeak() (stop func() uint64) {
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		var peak uint64
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-result
	}
}
