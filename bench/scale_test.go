package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/subactor/subactor/persistence"
)

// The measurements run small and untimed here: they must work and leave
// nothing behind (TestMain checks goroutines); their figures are for the
// report, not for assertions.

func TestScaleOnBothStores(t *testing.T) {
	ctx := context.Background()
	res, err := Scale(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	if res.Children != 200 || res.GoroutinesPerChild <= 0 || res.HeapBytesPerChild <= 0 {
		t.Fatalf("scale result %+v", res)
	}
	store, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "scale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if res, err = ScaleOn(ctx, 20, store); err != nil || res.Children != 20 {
		t.Fatalf("scale on bbolt %+v, %v", res, err)
	}
}

func TestAppendsWithAndWithoutGroupCommit(t *testing.T) {
	for _, writers := range []int{1, 4} {
		for _, group := range []bool{true, false} {
			rate, err := BoltAppends(context.Background(), t.TempDir(), writers, group, 20*time.Millisecond)
			if err != nil || rate.Writers != writers || rate.AppendsPerSecond <= 0 || rate.Latency.Samples != rate.Appends {
				t.Fatalf("appends with %d writers, group %v: %+v, %v", writers, group, rate, err)
			}
		}
	}
}

func TestLatencies(t *testing.T) {
	l, err := MeasureLatencies(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Distribution{"start": l.Start, "steer": l.Steer, "cancel": l.Cancel, "dispose": l.Dispose, "event": l.Event, "blocked": l.EventBlocked} {
		if d.Samples != 50 || d.P50 > d.P99 || d.P99 > d.Max {
			t.Errorf("%s distribution %+v", name, d)
		}
	}
	if iso := l.Isolation; iso.Rounds != 2 || !(iso.Ratio > 0) || iso.RatioQ1 > iso.RatioQ3 {
		t.Errorf("isolation %+v", iso)
	}
}

func TestStepGrowth(t *testing.T) {
	r, err := StepGrowth(context.Background(), 2, 30, 8, 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Early.Step != 8 || r.Late.Step != 20 || !(r.Early.Nanos > 0) || !(r.Late.Bytes > 0) || !(r.TimeRatio > 0) || len(r.Curve) == 0 {
		t.Fatalf("step growth %+v", r)
	}
	if _, err := StepGrowth(context.Background(), 1, 20, 8, 20, 3); err == nil {
		t.Fatal("a window past the last step was accepted")
	}
}

func TestParallel(t *testing.T) {
	r, err := Parallel(context.Background(), []int{1, 4}, 2, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 2 || r[0].Speedup != 1 || !(r[1].DelegationsPerSecond > 0) || r[1].Start.Samples == 0 {
		t.Fatalf("parallel %+v", r)
	}
}

func TestResume(t *testing.T) {
	r, err := Resume(context.Background(), t.TempDir(), []int{3, 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 2 || r[1].Turns != 10 || r[1].First.Samples != 2 || !(r[1].Bytes > r[0].Bytes) {
		t.Fatalf("resume %+v", r)
	}
}

func TestModelCall(t *testing.T) {
	r, err := ModelCall(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Client.Samples != 5 || r.Bare.Samples != 5 || !(r.ClientAllocs > 0) || !(r.BareBytes > 0) {
		t.Fatalf("model call %+v", r)
	}
}
