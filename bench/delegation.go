package bench

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// echoActor answers every string it is asked with the same string.
type echoActor struct{}

func (echoActor) Receive(c actor.Context) {
	if s, ok := c.Message().(string); ok {
		c.Respond(s)
	}
}

// RawProtoactor is the floor on protoactor's default dispatcher: the
// least the actor runtime does for one child, spawn an actor, one
// request/response, poison it and wait.
func RawProtoactor(b *testing.B) {
	rawProtoactor(b, actor.PropsFromProducer(func() actor.Actor { return echoActor{} }))
}

// RawProtoactorInline was the floor on subactor's own inline mailbox,
// which is gone (issue 19): the seam's actors run on protoactor's default
// dispatcher, so this is RawProtoactor.
func RawProtoactorInline(b *testing.B) { RawProtoactor(b) }

func rawProtoactor(b *testing.B, props *actor.Props) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer sys.Shutdown()
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

// SubactorSpawn is one foreground delegation through the Service, as the
// delegate tool makes it: a spawn child on the scripted model with
// in-memory sessions, awaited at once and disposed. Its child runs on a
// goroutine of its own.
func SubactorSpawn(b *testing.B) { spawnDelegations(b, persistence.NewMemory()) }

// SubactorSpawnAsync was SubactorSpawn without the foreground promise,
// which is gone (issue 19): every child runs on a goroutine of its own, so
// this is SubactorSpawn.
func SubactorSpawnAsync(b *testing.B) { SubactorSpawn(b) }

// SubactorSpawnBolt is SubactorSpawn with the sessions in the bbolt store,
// every turn fsynced before the child goes on.
func SubactorSpawnBolt(b *testing.B) {
	store, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	spawnDelegations(b, store)
}

func spawnDelegations(b *testing.B, store persistence.Store) {
	ctx := context.Background()
	s, err := newSeamWith(ctx, spawn.Config{Model: scripted.New(), Store: store})
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	prompt := []subagent.ContentBlock{subagent.Text("echo hi")}
	b.ReportAllocs()
	for b.Loop() {
		run, err := s.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: s.parent, Prompt: prompt})
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

// SubactorParentRun is the same work as EinoAgentTool: one parent run whose
// model calls the delegate tool once, the child answering at once, the
// parent answering with the child's output. Each run has a fresh parent
// session, as each Eino run starts from its query.
func SubactorParentRun(b *testing.B) { parentRuns(b, persistence.NewMemory()) }

// SubactorParentRunBolt is SubactorParentRun with parent and child
// sessions in the bbolt store, every turn fsynced.
func SubactorParentRunBolt(b *testing.B) {
	store, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	parentRuns(b, store)
}

func parentRuns(b *testing.B, store persistence.Store) {
	ctx := context.Background()
	model := delegating{child: scripted.New()}
	s, err := newSeamWith(ctx, spawn.Config{Model: model, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	tool := delegate.New(delegate.Config{Service: s.svc, Provider: "spawn"})
	defer tool.Close()
	prompt := []subagent.ContentBlock{subagent.Text("delegate")}
	b.ReportAllocs()
	for b.Loop() {
		parent, err := agent.New(ctx, agent.Config{Store: s.store, Model: model, Tools: []agent.Tool{tool},
			Header: subagent.SessionHeader{SessionID: nextSession()}})
		if err != nil {
			b.Fatal(err)
		}
		res := parent.Run(ctx, prompt, nil)
		if res.StopReason != subagent.Completed || !delegated(res.Output) {
			b.Fatalf("parent run %+v", res)
		}
	}
}
