package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

func quietActorSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

// echoActor answers every string it is asked with the same string.
type echoActor struct{}

func (echoActor) Receive(c actor.Context) {
	if s, ok := c.Message().(string); ok {
		c.Respond(s)
	}
}

// RawProtoactor is protoactor with its futures: spawn an actor, one
// RequestFuture, and a PoisonFuture waited for.
func RawProtoactor(ctx context.Context) (func() error, func(), error) {
	sys := quietActorSystem()
	props := actor.PropsFromProducer(func() actor.Actor { return echoActor{} })
	return func() error {
		pid := sys.Root.Spawn(props)
		r, err := sys.Root.RequestFuture(pid, "hi", time.Minute).Result()
		if err == nil && r != "hi" {
			err = fmt.Errorf("reply %v", r)
		}
		if perr := sys.Root.PoisonFuture(pid).Wait(); err == nil {
			err = perr
		}
		return err
	}, sys.Shutdown, nil
}

// ask is the lean floor's one message: its answer goes on reply.
type ask struct{ reply chan string }

// replier answers an ask on its channel.
type replier struct{}

func (replier) Receive(c actor.Context) {
	if a, ok := c.Message().(ask); ok {
		a.reply <- "hi"
	}
}

// LeanFloor is the least protoactor does for one child: spawn an actor on
// the default dispatcher (its mailbox runs on a goroutine of its own), one
// message answered on a channel, and Stop.
func LeanFloor(ctx context.Context) (func() error, func(), error) {
	sys := quietActorSystem()
	props := actor.PropsFromProducer(func() actor.Actor { return replier{} })
	reply := make(chan string, 1)
	return func() error {
		pid := sys.Root.Spawn(props)
		sys.Root.Send(pid, ask{reply})
		if r := <-reply; r != "hi" {
			return fmt.Errorf("reply %q", r)
		}
		sys.Root.Stop(pid)
		return nil
	}, sys.Shutdown, nil
}

// SubactorSpawn is one delegation through the Service, as the delegate
// tool makes it: a spawn child on the scripted model with in-memory
// sessions, started (its run on a goroutine of its own), awaited and
// disposed.
func SubactorSpawn(ctx context.Context) (func() error, func(), error) {
	return spawnDelegations(ctx, persistence.NewMemory())
}

// SubactorSpawnBolt is SubactorSpawn with the sessions in the bbolt store
// (in a directory of its own under the system's temporary directory),
// every turn fsynced before the child goes on.
func SubactorSpawnBolt(ctx context.Context) (func() error, func(), error) {
	store, remove, err := tempBolt()
	if err != nil {
		return nil, nil, err
	}
	do, done, err := spawnDelegations(ctx, store)
	if err != nil {
		remove()
		return nil, nil, err
	}
	return do, func() { done(); remove() }, nil
}

func spawnDelegations(ctx context.Context, store persistence.Store) (func() error, func(), error) {
	s, err := newSeamWith(ctx, spawn.Config{Model: scripted.New(), Store: store})
	if err != nil {
		return nil, nil, err
	}
	return func() error { return delegateOnce(ctx, s, s.parent) }, s.close, nil
}

// delegateOnce is one delegation of parent's: start, wait, dispose.
func delegateOnce(ctx context.Context, s *seam, parent *agent.Agent) error {
	run, err := s.svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent, Prompt: echoPrompt})
	if err != nil {
		return err
	}
	res, err := run.Wait(ctx)
	if err == nil && (res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "hi") {
		err = fmt.Errorf("%w: %+v", errAnswer, res)
	}
	return errors.Join(err, run.Dispose(ctx))
}

var echoPrompt = []subagent.ContentBlock{subagent.Text("echo hi")}

// AgentAlone is the child's own work in SubactorSpawn without an actor or
// a goroutine: its agent created on the memory store with the prompt, one
// turn of the scripted model, closed. With RunAlone it shows what of
// floor-lean-1p's budget the two parts of a delegation take by themselves.
func AgentAlone(ctx context.Context) (func() error, func(), error) {
	store, model := persistence.NewMemory(), scripted.New()
	seed := []agent.Message{{Role: agent.User, Content: echoPrompt}}
	return func() error {
		a, err := agent.New(ctx, agent.Config{Store: store, Model: model, Seed: seed,
			Header: subagent.SessionHeader{SessionID: nextSession(), ParentSessionID: "parent", DelegationDepth: 1}})
		if err != nil {
			return err
		}
		defer a.Close()
		if res := a.Run(ctx, nil, nil); res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "hi" {
			return fmt.Errorf("%w: %+v", errAnswer, res)
		}
		return nil
	}, func() {}, nil
}

// RunAlone is a delegation's run actor without an agent: started with a
// body that answers at once on a goroutine of its own, awaited, disposed.
func RunAlone(ctx context.Context) (func() error, func(), error) {
	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	body := func(context.Context, run.Gate) (subagent.Result, error) {
		return subagent.Result{StopReason: subagent.Completed, Output: echoAnswer}, nil
	}
	return func() error {
		h := run.Start(sys, run.Spec{Ctx: ctx, Body: body})
		res, err := h.Wait(ctx)
		if err == nil && res.StopReason != subagent.Completed {
			err = fmt.Errorf("%w: %+v", errAnswer, res)
		}
		return errors.Join(err, h.Dispose(ctx))
	}, sys.Shutdown, nil
}

var echoAnswer = []subagent.ContentBlock{subagent.Text("hi")}

// SubactorParentRun is the same work as EinoCompiled: one parent run whose
// model calls the delegate tool once, the child answering at once, the
// parent answering with the tool's result. Each run has a fresh parent
// session, as each Eino run starts from its query. Both sessions, every
// turn of them, are kept in the memory store.
func SubactorParentRun(ctx context.Context) (func() error, func(), error) {
	return parentRunsOn(ctx, persistence.NewMemory(), false)
}

// SubactorParentRunListened is SubactorParentRun with a listener on the
// Service receiving every event of the child (against
// EinoCompiledCallbacks).
func SubactorParentRunListened(ctx context.Context) (func() error, func(), error) {
	return parentRunsOn(ctx, persistence.NewMemory(), true)
}

// SubactorParentRunBolt is SubactorParentRun with parent and child
// sessions in the bbolt store, every turn fsynced.
func SubactorParentRunBolt(ctx context.Context) (func() error, func(), error) {
	store, remove, err := tempBolt()
	if err != nil {
		return nil, nil, err
	}
	do, done, err := parentRunsOn(ctx, store, false)
	if err != nil {
		remove()
		return nil, nil, err
	}
	return do, func() { done(); remove() }, nil
}

func parentRunsOn(ctx context.Context, store persistence.Store, listen bool) (func() error, func(), error) {
	model := delegating{child: scripted.New()}
	s, err := newSeamWith(ctx, spawn.Config{Model: model, Store: store})
	if err != nil {
		return nil, nil, err
	}
	tool := delegate.New(delegate.Config{Service: s.svc, Provider: spawn.DefaultName})
	events := 0
	var sub subagent.Subscription
	if listen {
		sub = s.svc.Listen(func(subagent.Event) error { events++; return nil })
	}
	prompt := []subagent.ContentBlock{subagent.Text("delegate")}
	do := func() error {
		parent, err := agent.New(ctx, agent.Config{Store: s.store, Model: model, Tools: []agent.Tool{tool},
			Header: subagent.SessionHeader{SessionID: nextSession()}})
		if err != nil {
			return err
		}
		defer parent.Close()
		res := parent.Run(ctx, prompt, nil)
		if res.StopReason != subagent.Completed || !delegated(res.Output) {
			return fmt.Errorf("parent run %+v", res)
		}
		return nil
	}
	return do, func() {
		if sub != nil {
			sub.Release()
		}
		tool.Close()
		s.close()
	}, nil
}

// tempBolt opens a bbolt store in a fresh temporary directory; remove
// closes it and removes the directory.
func tempBolt() (persistence.Backend, func(), error) {
	dir, err := os.MkdirTemp("", "subactor-bench-")
	if err != nil {
		return nil, nil, err
	}
	store, err := persistence.OpenBolt(filepath.Join(dir, "sessions.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() { store.Close(); os.RemoveAll(dir) }, nil
}
