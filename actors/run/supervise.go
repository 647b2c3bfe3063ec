package run

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
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

// spawner is where Spawn and Hosted ask a provider's run to be spawned,
// and the run actor's PID once it is.
type spawner struct {
	in   actor.SpawnerContext
	pid  *actor.PID
	mw   []actor.ReceiverMiddleware // the run actor's
	used atomic.Bool                // by the first run started under it
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
	r, pid, err := spawnThrough(context.WithoutCancel(ctx), &spawner{in: parent}, p, subagent.Scope{}, req)
	if err == nil && pid == nil {
		_ = r.Dispose(ctx)
		err = fmt.Errorf("%w: the provider's run is not a run actor of this process (a remote run lives on its host)", subagent.ErrUnsupported)
	}
	return pid, err
}

// Hosted starts a run through provider p for caller, an actor that
// commands it by message from elsewhere (another node's remote provider,
// K1), and returns it with its run actor's PID. The actor takes Steer,
// SteerWithdraw, Cancel, Dispose and Watch from caller only and refuses
// them from any other sender with a RemoteRefused (K3). ctx and scope are
// the run's as a Service would hand them to p: ctx ends the run, and
// scope's sink gets its progress. A request with a Continuation resumes
// that child through p's Resume. A provider whose runs are not run
// actors gets one around its run, which hands the run its steers.
func Hosted(ctx context.Context, sys *actor.ActorSystem, p subagent.Provider, scope subagent.Scope, req subagent.StartRequest, caller *actor.PID) (subagent.Run, *actor.PID, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	scope.Cancel = cancel
	sp := &spawner{in: supervised(sys, scope.Restarts), mw: []actor.ReceiverMiddleware{onlyFrom(caller)}}
	r, pid, err := spawnThrough(runCtx, sp, p, scope, req)
	if err != nil || pid != nil {
		if err != nil {
			cancel(err)
		}
		return r, pid, err
	}
	// The provider's own Run under a run actor: cancelling the actor's
	// child cancels the run, which is disposed before the actor counts as
	// quiesced.
	relay := &steerRelay{pending: map[uint64]context.CancelFunc{}}
	st, steerable := r.(subagent.Steerer)
	if steerable {
		relay.to = st
		sp.mw = append(sp.mw, relay.middleware)
	}
	h := Start(actors.Wrap(sys), Spec{
		Scope: scope, Ctx: context.WithValue(ctx, spawnerKey{}, sp), SessionID: r.SessionID(),
		Body: func(child context.Context, _ Gate) (subagent.Result, error) {
			stop := context.AfterFunc(child, func() { cancel(context.Cause(child)) })
			defer stop()
			return r.Wait(context.WithoutCancel(child))
		},
		Release: func() {
			cancel(context.Canceled)
			// A steer the run took is answered before the run
			// settles, as a run actor answers its own.
			relay.close()
			relay.relaying.Wait()
			_ = r.Dispose(context.Background())
		},
	})
	if !steerable {
		return struct{ subagent.Run }{h}, sp.pid, nil
	}
	return h, sp.pid, nil
}

// steerRelay hands the steers of a run actor around a provider's own Run
// to that run: its answer is the steer's.
type steerRelay struct {
	to      subagent.Steerer
	mu      sync.Mutex
	pending map[uint64]context.CancelFunc // by steer id, until answered
	closed  bool                          // steers come too late from now on
	// relaying counts the steers handed on and not answered yet.
	relaying sync.WaitGroup
}

func (s *steerRelay) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		switch m := env.Message.(type) {
		case *messages.Steer:
			sys, to, self, content := c.ActorSystem(), env.Sender, c.Self(), wire.ToContent(m.Content)
			ctx, cancel := context.WithCancel(context.Background())
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				cancel()
				if to != nil {
					sys.Root.RequestWithCustomSender(to, &messages.SteerAnswer{SteerId: m.SteerId, Reason: "run ended"}, self)
				}
				return
			}
			s.pending[m.SteerId] = cancel
			s.relaying.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.relaying.Done()
				err := s.to.Steer(ctx, content)
				s.mu.Lock()
				delete(s.pending, m.SteerId)
				s.mu.Unlock()
				cancel()
				answer := &messages.SteerAnswer{SteerId: m.SteerId, Admitted: err == nil}
				if err != nil {
					answer.Reason = err.Error()
				}
				sys.Root.RequestWithCustomSender(to, answer, self)
			}()
		case *messages.SteerWithdraw:
			s.mu.Lock()
			cancel := s.pending[m.SteerId]
			s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		case *actor.Stopped:
			s.close()
			next(c, env)
		default:
			next(c, env)
		}
	}
}

// close withdraws every steer still pending and refuses later ones.
func (s *steerRelay) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, cancel := range s.pending {
		cancel()
	}
}

// spawnThrough starts p's run with sp in its context, so that a run actor
// is spawned where sp says; pid is nil when p's run is no run actor.
func spawnThrough(ctx context.Context, sp *spawner, p subagent.Provider, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, *actor.PID, error) {
	start := p.Start
	if req.Continuation != nil {
		r, ok := p.(subagent.Resumer)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q", subagent.ErrNotResumable, p.Name())
		}
		start = r.Resume
	}
	r, err := start(context.WithValue(ctx, spawnerKey{}, sp), scope, req)
	if err != nil {
		return nil, nil, err
	}
	return r, sp.pid, nil
}

// onlyFrom refuses the run's commands from anyone but caller: a run
// hosted for a caller is that caller's alone (K3). Go values (the run's
// own handle, its child) have no wire form, so only this process sends
// them.
func onlyFrom(caller *actor.PID) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch env.Message.(type) {
			case *messages.Steer, *messages.SteerWithdraw, *messages.Cancel, *messages.Dispose, *messages.Watch:
				if env.Sender == nil || !env.Sender.Equal(caller) {
					if env.Sender != nil {
						c.ActorSystem().Root.Send(env.Sender, &messages.RemoteRefused{Code: clusterwire.RefusedForeignRun, Reason: "the run belongs to another caller"})
					}
					return
				}
			}
			next(c, env)
		}
	}
}
