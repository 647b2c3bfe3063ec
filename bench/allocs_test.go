package bench

import (
	"context"
	"testing"
)

// The allocation goals of issue 26 (bench/cmd/bench judges them by id in
// RESULTS.md too): a change that allocates more per delegation or per
// parent run fails here, in go test, before anyone runs the benchmarks.
// They also pin O4: with no tracer or meter provider set (as here) a
// delegation allocates no more for the runtime's tracing than before it
// had any.
func TestAllocationGoals(t *testing.T) {
	if race {
		t.Skip("the race detector allocates on its own account")
	}
	for _, g := range []struct {
		id    string
		name  string
		op    Op
		bound float64
	}{
		{"allocs-spawn", "SubactorSpawn", SubactorSpawn, 57},
		{"allocs-parent-run", "SubactorParentRun", SubactorParentRun, 110},
	} {
		t.Run(g.id, func(t *testing.T) {
			do, done, err := g.op(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			for range 100 { // warm: pools, maps and the store grown
				if err := do(); err != nil {
					t.Fatal(err)
				}
			}
			var failed error
			allocs := testing.AllocsPerRun(1000, func() {
				if err := do(); err != nil && failed == nil {
					failed = err
				}
			})
			if failed != nil {
				t.Fatal(failed)
			}
			if allocs > g.bound {
				t.Errorf("%s: %.0f allocations per %s, want at most %.0f", g.id, allocs, g.name, g.bound)
			}
			t.Logf("%s: %.0f allocations per %s (at most %.0f)", g.id, allocs, g.name, g.bound)
		})
	}
}
