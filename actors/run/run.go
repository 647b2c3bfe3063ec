package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/ask"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Body is the child's work. It runs on a goroutine the run owns, must return
// when ctx ends, and calls steer.Take before every model request. A panic is
// recovered and settles the run with stop reason error.
type Body func(ctx context.Context, steer *Gate) (subagent.Result, error)

// Spec describes one activation.
type Spec struct {
	ID    string         // Run.ID: the child's session id, or a lifecycle id
	Agent subagent.Agent // the published local agent, or nil
	// Ctx is the start request's context: when it ends, the child is
	// cancelled (S5).
	Ctx  context.Context
	Body Body
	// Release frees the child's resources after Body returned and before
	// the run counts as quiesced. Optional.
	Release func()
}

// Handle is the caller's side of a run.
type Handle struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	id      string
	agent   subagent.Agent
	settled context.Context // done once result and err are final
	result  subagent.Result
	err     error
	// quiesced is closed once the child has exited and the actor stopped.
	quiesced chan struct{}
}

// Start spawns the run actor, which starts the body at once. The provider
// calls Publish on the handle just before returning it to its caller, or
// Dispose to roll back.
func Start(sys *actors.System, spec Spec) *Handle {
	if spec.Ctx == nil {
		spec.Ctx = context.Background()
	}
	settled, settle := context.WithCancel(context.Background())
	h := &Handle{sys: sys.ActorSystem(), id: spec.ID, agent: spec.Agent, settled: settled, quiesced: make(chan struct{})}
	a := &runActor{h: h, spec: spec, life: NewLifecycle(), settle: settle, replies: map[string]*actor.PID{}}
	// The producer returns the same instance, so a restart after a panic
	// in Receive keeps the state and Restarting settles the run (A2).
	h.pid = h.sys.Root.SpawnPrefix(inline.Props(func() actor.Actor { return a }), "run-")
	return h
}

// ID implements subagent.Run.
func (h *Handle) ID() string { return h.id }

// LocalAgent implements subagent.Run.
func (h *Handle) LocalAgent() subagent.Agent { return h.agent }

// Publish records that the caller now owns the run.
func (h *Handle) Publish() { h.sys.Root.Send(h.pid, &messages.Publish{}) }

// Wait implements subagent.Run.
func (h *Handle) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-h.settled.Done():
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
	case <-h.settled.Done():
		f(h.result, h.err)
	default:
		h.sys.Root.Send(h.pid, observe{f})
	}
}

// observe registers a settle observer; a local command carrying a func.
type observe struct{ f func(subagent.Result, error) }

// Dispose implements subagent.Run. Every caller waits for the same signal,
// so concurrent and repeated calls all return once the run has quiesced.
func (h *Handle) Dispose(ctx context.Context) error {
	select {
	case <-h.quiesced:
		return nil
	default:
	}
	h.sys.Root.Send(h.pid, &messages.Dispose{})
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
	call := ask.Send(h.sys, h.pid, &messages.Steer{Content: messages.FromContent(message)})
	defer call.Close()
	reply, err := call.Wait(ctx, h.quiesced)
	if err != nil && ctx.Err() != nil {
		h.sys.Root.Send(h.pid, &messages.SteerWithdraw{SteerId: call.ID()})
		// The actor answers every steer it holds, so this wait is short.
		if reply, err := call.Wait(context.Background(), h.quiesced); err == nil && reply.(*messages.SteerAnswer).Admitted {
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
	gone  <-chan struct{}
	reply *ask.Call // one address for every Take of the run
}

// errClosed tells the loop it may make no further model request.
var errClosed = errors.New("run: closed for new requests")

// Take implements agent.SteerSource.
func (g *Gate) Take(ctx context.Context) ([][]subagent.ContentBlock, error) {
	g.reply.Send(g.pid, &messages.TakeSnapshot{})
	reply, err := g.reply.Wait(ctx, g.gone)
	if err != nil {
		return nil, err
	}
	snap := reply.(*messages.Snapshot)
	if snap.Closed {
		return nil, errClosed
	}
	out := make([][]subagent.ContentBlock, len(snap.Steers))
	for i, s := range snap.Steers {
		out[i] = messages.ToContent(s.Content)
	}
	return out, nil
}
