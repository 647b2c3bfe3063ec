// Package fanout delivers events to listeners, one listener actor each, so
// that a panicking, erroring or blocked listener is logged and delays nobody
// but itself. An owner actor (registry or parent) embeds a Fanout and feeds
// it from its own Receive.
package fanout

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// MaxBacklog bounds the events a listener may have outstanding. Beyond it
// events for that listener are dropped and counted, never queued unbounded.
const MaxBacklog = 1024

type sub struct {
	pid      *actor.PID
	backlog  int
	dropped  int
	lastDrop int // dropped when last reported
}

// Fanout is the owner actor's set of listeners, in subscription order.
type Fanout struct {
	log   *slog.Logger
	order []string
	subs  map[string]*sub
}

// New returns an empty Fanout.
func New(log *slog.Logger) *Fanout { return &Fanout{log: log, subs: map[string]*sub{}} }

// Add spawns a listener actor as a child of the owner and returns its id.
func (f *Fanout) Add(c actor.Context, l subagent.Listener) string {
	pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return &listenerActor{l: l, log: f.log} }))
	f.subs[pid.Id] = &sub{pid: pid}
	f.order = append(f.order, pid.Id)
	return pid.Id
}

// Sync is answered by a listener actor once it has handled every event sent
// to it before.
type Sync struct{ reply.To }

// Drain is Sync, after which the listener actor stops.
type Drain struct{ reply.To }

// PID returns the listener actor with id, or nil.
func (f *Fanout) PID(id string) *actor.PID {
	if s, ok := f.subs[id]; ok {
		return s.pid
	}
	return nil
}

// Len is the number of listeners.
func (f *Fanout) Len() int { return len(f.order) }

// Remove sends no more events to a listener and returns its actor, which the
// caller drains; nil if there is no such listener.
func (f *Fanout) Remove(id string) *actor.PID {
	s, ok := f.subs[id]
	if !ok {
		return nil
	}
	delete(f.subs, id)
	for i, o := range f.order {
		if o == id {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
	return s.pid
}

// Emit sends ev to every listener.
func (f *Fanout) Emit(c actor.Context, ev any) {
	for _, id := range f.order {
		f.EmitTo(c, id, ev)
	}
}

// EmitTo sends ev to one listener, or drops and counts it when that
// listener's backlog is full.
func (f *Fanout) EmitTo(c actor.Context, id string, ev any) {
	s, ok := f.subs[id]
	if !ok {
		return
	}
	if s.backlog >= MaxBacklog {
		s.dropped++
		if s.dropped == s.lastDrop+1 {
			f.log.Warn("subagent: listener backlog full, dropping events", "listener", id)
		}
		return
	}
	s.backlog++
	c.Send(s.pid, ev)
}

// Delivered handles a listener's acknowledgement; true when msg was one.
func (f *Fanout) Delivered(c actor.Context, msg any) bool {
	if _, ok := msg.(*messages.Delivered); !ok {
		return false
	}
	if s, ok := f.subs[c.Sender().GetId()]; ok {
		s.backlog--
		if s.dropped > s.lastDrop && s.backlog == 0 {
			f.log.Warn("subagent: listener caught up", "listener", c.Sender().GetId(), "dropped", s.dropped-s.lastDrop)
			s.lastDrop = s.dropped
		}
	}
	return true
}

// listenerActor calls one listener per event and acknowledges each.
type listenerActor struct {
	l   subagent.Listener
	log *slog.Logger
}

func (a *listenerActor) Receive(c actor.Context) {
	msg := c.Message()
	switch m := msg.(type) {
	case *Sync:
		m.Answer(struct{}{})
		return
	case *Drain:
		m.Answer(struct{}{})
		c.Stop(c.Self())
		return
	}
	ev, err := messages.ToEvent(msg)
	if err != nil {
		return // lifecycle messages
	}
	defer c.Request(c.Parent(), &messages.Delivered{})
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("subagent: listener panicked", "event", ev.Type(), "panic", p)
		}
	}()
	if err := a.l(ev); err != nil {
		a.log.Warn("subagent: listener failed", "event", ev.Type(), "err", err)
	}
}
