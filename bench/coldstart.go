package bench

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"syscall"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func quietSystem() *actors.System {
	return actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
}

// ColdStart is a new Service and spawn provider (with a new in-memory
// store and parent agent) on a System that already runs, as an embedder's
// or one shared by many Services, up to its first delegation's result
// and disposal, count times. Closing the Service afterwards is not
// counted.
func ColdStart(ctx context.Context, count int) (Cost, error) {
	sys := quietSystem()
	defer sys.Shutdown()
	model := scripted.New()
	return measureEach(count, func() (func(), error) {
		svc, err := firstDelegation(ctx, sys, model)
		return svc.Close, err
	})
}

// NewSystem is actors.NewSystem alone, the runtime's own floor (protoactor
// builds its process registry in every new actor system); Shutdown is not
// counted.
func NewSystem(count int) (Cost, error) {
	return measureEach(count, func() (func(), error) {
		return quietSystem().Shutdown, nil
	})
}

// measureEach is Measure for an operation whose teardown must not be
// counted: op returns it, and the counters are read around each op alone.
func measureEach(count int, op func() (undo func(), err error)) (Cost, error) {
	c := Cost{Ops: count}
	var before, after runtime.MemStats
	for range count {
		runtime.ReadMemStats(&before)
		cpu, wall := CPUTime(syscall.RUSAGE_SELF), time.Now()
		undo, err := op()
		c.CPUNs += float64(CPUTime(syscall.RUSAGE_SELF) - cpu)
		c.WallNs += float64(time.Since(wall))
		runtime.ReadMemStats(&after)
		c.Bytes += float64(after.TotalAlloc - before.TotalAlloc)
		c.Allocs += float64(after.Mallocs - before.Mallocs)
		if undo != nil {
			undo()
		}
		if err != nil {
			return Cost{}, err
		}
	}
	n := float64(count)
	c.CPUNs, c.WallNs, c.Bytes, c.Allocs = c.CPUNs/n, c.WallNs/n, c.Bytes/n, c.Allocs/n
	return c, nil
}

// firstDelegation sets up a Service with a spawn provider on sys and runs
// one delegation, start to disposal.
func firstDelegation(ctx context.Context, sys *actors.System, model agent.Model) (*registry.Service, error) {
	store := persistence.NewMemory()
	svc := registry.New(sys)
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: model})
	if err != nil {
		return svc, err
	}
	if _, err := svc.RegisterProvider(provider); err != nil {
		return svc, err
	}
	parent, err := agent.New(ctx, agent.Config{Store: store, Model: model, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		return svc, err
	}
	s := &seam{svc: svc}
	return svc, delegateOnce(ctx, s, parent)
}
