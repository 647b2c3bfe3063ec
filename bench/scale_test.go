package bench

import (
	"context"
	"testing"
)

// TestScaleAndLatenciesRun runs the measurements small, untimed: they must
// work and leave nothing behind (TestMain checks goroutines); their figures
// are for the report, not for assertions.
func TestScaleAndLatenciesRun(t *testing.T) {
	ctx := context.Background()
	res, err := Scale(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	if res.Children != 200 || res.GoroutinesPerChild <= 0 || res.HeapBytesPerChild <= 0 {
		t.Fatalf("scale result %+v", res)
	}
	for _, writers := range []int{1, 4} {
		rate, err := BoltAppends(ctx, t.TempDir(), writers, 40)
		if err != nil || rate.Writers != writers || rate.AppendsPerSecond <= 0 {
			t.Fatalf("appends with %d writers: %+v, %v", writers, rate, err)
		}
	}
	l, err := MeasureLatencies(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Distribution{"start": l.Start, "steer": l.Steer, "cancel": l.Cancel, "dispose": l.Dispose, "event": l.Event, "blocked": l.EventBlocked} {
		if d.Samples != 50 || d.P50 > d.P99 || d.P99 > d.Max {
			t.Errorf("%s distribution %+v", name, d)
		}
	}
}
