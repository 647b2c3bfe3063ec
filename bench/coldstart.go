package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

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
// and disposal. Closing the Service afterwards is not timed.
func ColdStart(b *testing.B) {
	sys := quietSystem()
	defer sys.Shutdown()
	ctx := context.Background()
	model := scripted.New()
	b.ReportAllocs()
	for b.Loop() {
		svc, err := firstDelegation(ctx, sys, model)
		b.StopTimer()
		if svc != nil {
			svc.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// ColdStartWithSystem is ColdStart with a new System of its own as well,
// shut down untimed: what a process that embeds nothing else pays.
func ColdStartWithSystem(b *testing.B) {
	ctx := context.Background()
	model := scripted.New()
	b.ReportAllocs()
	for b.Loop() {
		sys := quietSystem()
		svc, err := firstDelegation(ctx, sys, model)
		b.StopTimer()
		if svc != nil {
			svc.Close()
		}
		sys.Shutdown()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// NewSystem is actors.NewSystem alone, the runtime's own floor (protoactor
// builds its process registry in every new actor system); Shutdown is not
// timed.
func NewSystem(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sys := quietSystem()
		b.StopTimer()
		sys.Shutdown()
		b.StartTimer()
	}
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
	run, err := svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text("echo hi")}})
	if err != nil {
		return svc, err
	}
	res, err := run.Wait(ctx)
	if err == nil && (res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "hi") {
		err = errAnswer
	}
	if derr := run.Dispose(ctx); err == nil {
		err = derr
	}
	return svc, err
}
