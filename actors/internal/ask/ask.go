// Package ask sends a request to an actor and waits for the reply under a
// context.Context. protoactor futures take a time.Duration and race a late
// reply against their timeout; a Call instead is a one-slot reply address,
// so waiting costs no goroutine and no timer, the caller may stop waiting
// and wait again (to learn the fate of a withdrawn steer), and one Call
// serves a sequence of requests (a child's loop asking before every step).
package ask

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrGone means the target actor no longer exists.
var ErrGone = errors.New("ask: actor gone")

// Call is a reply address for one request at a time. Close it when done.
type Call struct {
	sys   *actor.ActorSystem
	reply *actor.PID
	ch    chan any
}

// New registers a reply address.
func New(sys *actor.ActorSystem) *Call {
	c := &Call{sys: sys, ch: make(chan any, 1)}
	c.reply, _ = sys.ProcessRegistry.Add(replyProcess{c.ch}, "ask$"+sys.ProcessRegistry.NextId())
	return c
}

// Send sends msg to target, to be answered at this address. A reply to an
// earlier request that nobody waited for is discarded first.
func (c *Call) Send(target *actor.PID, msg any) {
	select {
	case <-c.ch:
	default:
	}
	c.sys.Root.RequestWithCustomSender(target, msg, c.reply)
}

// Follow sends msg to target from this address without discarding a reply
// already received: a follow-up about the pending request (a withdraw).
func (c *Call) Follow(target *actor.PID, msg any) {
	c.sys.Root.RequestWithCustomSender(target, msg, c.reply)
}

// Send sends msg to target from a new Call.
func Send(sys *actor.ActorSystem, target *actor.PID, msg any) *Call {
	c := New(sys)
	c.Send(target, msg)
	return c
}

// Wait returns the reply, ErrGone if the target is dead, or ctx's error.
// A request that reaches an actor after it decided to stop is neither
// answered nor dead-lettered, so the caller passes gone, closed once the
// target has stopped (nil when it never does); a reply sent before that
// still wins.
func (c *Call) Wait(ctx context.Context, gone <-chan struct{}) (any, error) {
	select {
	case m := <-c.ch:
		return reply(m)
	case <-gone:
		select {
		case m := <-c.ch:
			return reply(m)
		default:
			return nil, ErrGone
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func reply(m any) (any, error) {
	if _, dead := m.(*actor.DeadLetterResponse); dead {
		return nil, ErrGone
	}
	return m, nil
}

// Close releases the reply address; a reply arriving later is dropped.
func (c *Call) Close() { c.sys.ProcessRegistry.Remove(c.reply) }

// replyProcess keeps the first reply; the target answers each request once.
type replyProcess struct{ ch chan any }

func (p replyProcess) SendUserMessage(_ *actor.PID, m any) {
	select {
	case p.ch <- actor.UnwrapEnvelopeMessage(m):
	default:
	}
}
func (replyProcess) SendSystemMessage(*actor.PID, any) {}
func (replyProcess) Stop(*actor.PID)                   {}
