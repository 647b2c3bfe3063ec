package run

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Body is the child's work. It runs on a goroutine the run owns, must return
// when ctx ends, and calls steer.Take before every model request. A panic is
// recovered: the run relaunches (see Spec.Relaunch) or settles with stop
// reason error.
type Body func(ctx context.Context, steer *Gate) (subagent.Result, error)

// Spec describes one activation.
type Spec struct {
	// Scope is the one the Service handed the provider: the run id, and
	// the sink through which the run actor is spawned under its parent's
	// actor, so that stopping the parent stops its runs. Without a
	// Service's scope the run gets a fresh id and lives at the root.
	Scope subagent.Scope
	// SessionID is the child's session, "" when it has none here.
	SessionID string
	Agent     subagent.Agent // the published local agent, or nil
	// Ctx is the start request's context: when it ends, the child is
	// cancelled with its cause (S5).
	Ctx  context.Context
	Body Body
	// Relaunch, when set, continues the child from its last checkpoint
	// after a crash (of the child or of the run actor), within Restarts
	// (the Scope's policy when zero); without it a crash settles the run
	// with stop reason error (A2).
	Relaunch Body
	Restarts subagent.RestartPolicy
	// Release frees the child's resources after each Body returned and
	// before the run counts as quiesced. Optional.
	Release func()
}

// Handle is the caller's side of a run. It lives in its run actor's
// allocation (see runActor).
type Handle struct {
	sys       *actor.ActorSystem
	pid       *actor.PID
	id        string
	sessionID string
	agent     subagent.Agent
	settled   chan struct{} // closed once result and err are final
	result    subagent.Result
	err       error
	// quiesced is closed once the actor has stopped and every goroutine
	// it launched has returned; live counts those still to finish.
	// stopped is closed once the actor has stopped: a message sent to it
	// then is never answered.
	quiesced chan struct{}
	stopped  chan struct{}
	live     atomic.Int32
	steers   atomic.Uint64 // correlation ids of this handle's steers
}

// host spawns run actors under a parent actor; the Service's event sink is
// one.
type host interface {
	SpawnRun(props *actor.Props) (*actor.PID, error)
}

// Start spawns the run actor, which starts the body at once. The provider
// calls Publish on the handle just before returning it to its caller, or
// Dispose to roll back.
func Start(sys *actors.System, spec Spec) *Handle {
	if spec.Ctx == nil {
		spec.Ctx = context.Background()
	}
	if spec.Restarts == (subagent.RestartPolicy{}) {
		spec.Restarts = spec.Scope.Restarts
	}
	id := spec.Scope.RunID
	if id == "" {
		id = uuid.NewString()
	}
	a := &runActor{spec: spec}
	h := &a.h
	h.sys, h.id, h.sessionID, h.agent = sys.ActorSystem(), id, spec.SessionID, spec.Agent
	h.settled, h.quiesced, h.stopped = make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.live.Store(1) // the actor itself
	a.life.init(spec.Relaunch != nil, spec.Restarts)
	a.observers = a.observer[:0]
	props := inline.Props(func() actor.Actor { return a })
	if parent, ok := spec.Scope.Events.(host); ok {
		if pid, err := parent.SpawnRun(props); err == nil {
			h.pid = pid
			return h
		}
	}
	h.pid = h.sys.Root.SpawnPrefix(props, "run-")
	return h
}

// ID implements subagent.Run.
func (h *Handle) ID() string { return h.id }

// SessionID implements subagent.Run.
func (h *Handle) SessionID() string { return h.sessionID }

// LocalAgent implements subagent.Run.
func (h *Handle) LocalAgent() subagent.Agent { return h.agent }

// Publish records that the caller now owns the run.
func (h *Handle) Publish() { h.sys.Root.Send(h.pid, publish{}) }

// Wait implements subagent.Run.
func (h *Handle) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-h.settled:
		return h.result, h.err
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}

// OnSettled implements subagent.Run. The run actor calls f as it settles,
// before Wait returns, so what f sends is ordered before anything the
// waiter does next; f must not block. Register observers before Dispose.
func (h *Handle) OnSettled(f func(subagent.Result, error)) {
	select {
	case <-h.settled:
		f(h.result, h.err)
	default:
		h.sys.Root.Send(h.pid, observe{f})
	}
}

// Dispose implements subagent.Run. Every caller waits for the same signal,
// so concurrent and repeated calls all return once the run has quiesced.
func (h *Handle) Dispose(ctx context.Context) error {
	select {
	case <-h.quiesced:
		return nil
	default:
	}
	h.sys.Root.Send(h.pid, dispose{})
	select {
	case <-h.quiesced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Steer implements subagent.Steerer. When ctx ends first the steer is
// withdrawn; the call then reports what became of it: admitted after all
// (nil) or ctx's error.
func (h *Handle) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	if len(message) == 0 {
		return &subagent.InvalidRequestError{Field: "message", Reason: "must not be empty"}
	}
	id := h.steers.Add(1)
	call := ask.Send(h.sys, h.pid, &messages.Steer{SteerId: id, Content: messages.FromContent(message)})
	defer call.Close()
	reply, err := call.Wait(ctx, h.stopped)
	if err != nil && ctx.Err() != nil {
		call.Follow(h.pid, &messages.SteerWithdraw{SteerId: id})
		// The actor answers every steer it holds, so this wait is short.
		if reply, err := call.Wait(context.Background(), h.stopped); err == nil && reply.(*messages.SteerAnswer).Admitted {
			return nil
		}
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", subagent.ErrNotDelivered, err)
	}
	if a := reply.(*messages.SteerAnswer); !a.Admitted {
		return fmt.Errorf("%w: %s", subagent.ErrNotDelivered, a.Reason)
	}
	return nil
}

// Gate is the child's side of steering: Take is asked before every model
// request and returns the steers admitted into it.
type Gate struct {
	pid   *actor.PID
	root  *actor.RootContext
	reply chan snapshot // one channel for every Take of the child

	// The child's goroutine: what it runs, and its exit for the actor.
	run    *runActor // whose Handle's stopped ends every Take
	ctx    context.Context
	cancel context.CancelCauseFunc
	body   Body
	exited childExited
}

// errClosed tells the loop it may make no further model request.
var errClosed = errors.New("run: closed for new requests")

// Take implements agent.SteerSource.
func (g *Gate) Take(ctx context.Context) ([][]subagent.ContentBlock, error) {
	select { // a snapshot for a Take whose caller stopped waiting
	case <-g.reply:
	default:
	}
	g.root.Send(g.pid, takeSnapshot{reply: g.reply})
	select {
	case snap := <-g.reply:
		if snap.closed {
			return nil, errClosed
		}
		return snap.steers, nil
	case <-g.run.h.stopped:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
