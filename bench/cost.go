package bench

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// An Op is a per-operation benchmark: it sets one operation up, returning
// the operation (run as many times as asked) and what tears it down.
type Op func(ctx context.Context) (do func() error, done func(), err error)

// Cost is what a fixed count of operations cost, per operation. CPU is
// user + system time of the whole process (getrusage RUSAGE_SELF: every
// goroutine, the garbage collector included), which a machine busy with
// other work changes much less than Wall.
type Cost struct {
	Ops    int     `json:"ops"`
	CPUNs  float64 `json:"cpuNsPerOp"`
	WallNs float64 `json:"wallNsPerOp"`
	Bytes  float64 `json:"bytesPerOp"`
	Allocs float64 `json:"allocsPerOp"`
}

// Measure sets op up, runs it count/10 times to warm up, then count times
// timed from a collected heap, and tears it down (untimed).
func Measure(ctx context.Context, op Op, count int) (Cost, error) {
	do, done, err := op(ctx)
	if err != nil {
		return Cost{}, err
	}
	defer done()
	for range max(1, count/10) {
		if err := do(); err != nil {
			return Cost{}, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, wall := CPUTime(syscall.RUSAGE_SELF), time.Now()
	for range count {
		if err := do(); err != nil {
			return Cost{}, err
		}
	}
	c := Cost{Ops: count, CPUNs: float64(CPUTime(syscall.RUSAGE_SELF) - cpu), WallNs: float64(time.Since(wall))}
	runtime.ReadMemStats(&after)
	c.Bytes, c.Allocs = float64(after.TotalAlloc-before.TotalAlloc), float64(after.Mallocs-before.Mallocs)
	n := float64(count)
	c.CPUNs, c.WallNs, c.Bytes, c.Allocs = c.CPUNs/n, c.WallNs/n, c.Bytes/n, c.Allocs/n
	return c, nil
}

// CPUTime is the user + system time getrusage reports for who
// (RUSAGE_SELF, or RUSAGE_CHILDREN: the children waited for so far).
func CPUTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(err) // only for a bad who
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Bench runs op under the testing package, for go test -bench.
func (op Op) Bench(b *testing.B) {
	do, done, err := op(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	b.ReportAllocs()
	for b.Loop() {
		if err := do(); err != nil {
			b.Fatal(err)
		}
	}
}
