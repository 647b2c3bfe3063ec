package run

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"

	"github.com/subactor/subactor/subagent"
)

// A run actor is supervised with protoactor's own machinery: when its
// child or the actor itself crashes, the actor escalates the failure
// (*CrashError) to its parent actor, whose SupervisorStrategy decides.
// Restart relaunches the child from its last checkpoint (a run without
// one settles error), Stop settles the run error with the crash as its
// cause, Resume goes on with a live child (a dead one settles error), and
// Escalate hands the failure up, whose restart stops the run. A run that
// Start spawns at the root has a guardian that supervises it with its
// restart policy; one that Spawn puts under an actor has that actor's
// strategy.

// strategy is the supervisor strategy a restart policy stands for: at
// most p.Max restarts within any p.Window, each a relaunch from the last
// checkpoint; past it, or with the zero policy, a crash stops the run,
// which settles error. It is the strategy the Service supervises its runs
// with (registry.WithRunRestarts).
func strategy(p subagent.RestartPolicy) actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(max(p.Max, 0), p.Window, actor.DefaultDecider)
}

// guardians are the root contexts a system's runs are spawned from, one
// per restart policy, each with a guardian that supervises with the
// policy's strategy: protoactor makes one guardian per strategy value, so
// the strategies are kept, not made per run.
type guardians map[subagent.RestartPolicy]*actor.RootContext

var guardiansID = extensions.NextExtensionID()

// ExtensionID implements extensions.Extension.
func (guardians) ExtensionID() extensions.ExtensionID { return guardiansID }

// guarding serialises every use of the guardians: protoactor's
// extensions are a plain array, so a Get beside a Register is a race.
var guarding sync.Mutex

// supervised returns the root context that spawns sys's runs under the
// guardian of policy p.
func supervised(sys *actor.ActorSystem, p subagent.RestartPolicy) *actor.RootContext {
	guarding.Lock()
	defer guarding.Unlock()
	g, _ := sys.Extensions.Get(guardiansID).(guardians)
	if g == nil {
		g = guardians{}
		sys.Extensions.Register(g)
	}
	r := g[p]
	if r == nil {
		r = actor.NewRootContext(sys, nil).WithGuardian(strategy(p))
		g[p] = r
	}
	return r
}

// spawner is where Spawn asks a provider's run to be spawned, and the
// run actor's PID once it is.
type spawner struct {
	in  actor.SpawnerContext
	pid *actor.PID
}

type spawnerKey struct{}

// Spawn starts a child through provider p as a run actor spawned under
// parent (an actor's Context, a RootContext, or a cluster member's), and
// returns its PID: parent's SupervisorStrategy supervises it, parent may
// Watch it (Terminated once it has quiesced after a Dispose), and every
// command is a message in package messages: Steer (answered by a
// SteerAnswer), SteerWithdraw, Cancel, Dispose (RunQuiesced) and Watch
// (RunSettled, then RunQuiesced); every answer's Sender is the run's PID.
// Stopping parent cancels the run.
//
// p.Start runs on the caller's goroutine, so an actor calling Spawn from
// its Receive waits for the provider's setup (an ACP agent's handshake,
// say). ctx bounds that setup only: the run lives until it is disposed
// or parent stops. The run has no Service's scope (p.Start gets the zero
// Scope): it gets a fresh id and emits no progress.
func Spawn(ctx context.Context, parent actor.SpawnerContext, p subagent.Provider, req subagent.StartRequest) (*actor.PID, error) {
	sp := &spawner{in: parent}
	r, err := p.Start(context.WithValue(context.WithoutCancel(ctx), spawnerKey{}, sp), subagent.Scope{}, req)
	if err != nil {
		return nil, err
	}
	if sp.pid == nil {
		_ = r.Dispose(ctx)
		return nil, fmt.Errorf("%w: the provider's run is not a run actor of this process (a remote run lives on its host)", subagent.ErrUnsupported)
	}
	return sp.pid, nil
}
