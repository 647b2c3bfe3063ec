package cluster

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// K1: a host's load is gossiped at most once a gossip interval, and the
// count a burst of starts and ends leaves is the one published.
func TestK1_AHostsLoadIsPublishedOnceAnIntervalWithItsLatestCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 300 * time.Millisecond
		var mu sync.Mutex
		var published []int
		g := &loadGossip{every: every, publish: func(runs int) {
			mu.Lock()
			defer mu.Unlock()
			published = append(published, runs)
		}}
		seen := func() []int {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(published)
		}

		g.changed(0) // the first publication goes at once
		if got := seen(); !slices.Equal(got, []int{0}) {
			t.Fatalf("after the first change: published %v, want [0]", got)
		}
		for _, runs := range []int{1, 2, 3, 2} { // a burst within the interval
			g.changed(runs)
		}
		if got := seen(); !slices.Equal(got, []int{0}) {
			t.Fatalf("within the interval: published %v, want [0] only", got)
		}
		time.Sleep(every)
		if got := seen(); !slices.Equal(got, []int{0, 2}) {
			t.Fatalf("at the interval's end: published %v, want [0 2] (the burst's last count)", got)
		}
		time.Sleep(2 * every) // quiet for longer than an interval
		g.changed(1)
		if got := seen(); !slices.Equal(got, []int{0, 2, 1}) {
			t.Fatalf("after a quiet interval: published %v, want [0 2 1] at once", got)
		}
		g.changed(0)
		g.stop() // the node stops: the pending publication does not go
		time.Sleep(2 * every)
		if got := seen(); !slices.Equal(got, []int{0, 2, 1}) {
			t.Fatalf("after stop: published %v, want nothing more", got)
		}
	})
}
