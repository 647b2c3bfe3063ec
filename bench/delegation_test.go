package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle goroutine outlives its actor system.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// echoActor answers every string it is asked with the same string.
type echoActor struct{}

func (echoActor) Receive(c actor.Context) {
	if s, ok := c.Message().(string); ok {
		c.Respond(s)
	}
}

// BenchmarkRawProtoactor is the floor: the least the actor runtime does for
// one child, spawn an actor, one request/response, poison it and wait.
func BenchmarkRawProtoactor(b *testing.B) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	props := actor.PropsFromProducer(func() actor.Actor { return echoActor{} })
	b.ReportAllocs()
	for b.Loop() {
		pid := sys.Root.Spawn(props)
		r, err := sys.Root.RequestFuture(pid, "hi", time.Minute).Result()
		if err != nil || r != "hi" {
			b.Fatalf("reply %v, %v", r, err)
		}
		if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubactorSpawn is one delegation through the Service: a spawn
// child on the scripted model with in-memory sessions, started, awaited and
// disposed.
func BenchmarkSubactorSpawn(b *testing.B) {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()
	store := persistence.NewMemory()
	model := scripted.New()
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: model})
	if err != nil {
		b.Fatal(err)
	}
	release, err := svc.RegisterProvider(provider)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	parent, err := agent.New(ctx, agent.Config{Store: store, Model: model, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		b.Fatal(err)
	}
	req := subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text("echo hi")}}
	b.ReportAllocs()
	for b.Loop() {
		run, err := svc.Start(ctx, spawn.DefaultName, req)
		if err != nil {
			b.Fatal(err)
		}
		res, err := run.Wait(ctx)
		if err != nil || res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "hi" {
			b.Fatalf("result %+v, %v", res, err)
		}
		if err := run.Dispose(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
