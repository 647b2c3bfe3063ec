package ids

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

// Ids are time-ordered UUIDs (version 7): the bbolt store's sessions
// bucket, keyed by id, then grows at its end (see the package doc).
func TestNewIsATimeOrderedUUIDv7(t *testing.T) {
	prev := ""
	for range 1000 {
		s := New()
		u, err := uuid.Parse(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != s {
			t.Fatalf("%q: version %d, variant %v, canonical %q", s, u.Version(), u.Variant(), u.String())
		}
		if s <= prev {
			t.Fatalf("%q minted after %q sorts before it", s, prev)
		}
		prev = s
	}
}

func TestNewNeverRepeatsUnderConcurrency(t *testing.T) {
	const goroutines, each = 8, 5000
	var mu sync.Mutex
	seen := make(map[string]bool, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			mine := make([]string, each)
			for i := range mine {
				mine[i] = New()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range mine {
				if seen[s] {
					t.Errorf("%q minted twice", s)
				}
				seen[s] = true
			}
		})
	}
	wg.Wait()
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		_ = New()
	}
}
