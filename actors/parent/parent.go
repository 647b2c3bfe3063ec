// Package parent is the parent actor: one per delegating agent someone
// listens to (ListenParent), keyed by its session id. It owns the run
// events of that agent's children and their listeners. A run started
// while nobody had subscribed to its parent has no events to deliver and
// never reaches a parent actor.
//
// It is the sequencer of a run's events. The Service hands each provider a
// sink whose progress comes here while someone listens (announced by
// Expect), held until the Service sends Published once Start succeeded
// (or Discarded when it failed); only then it attaches the observer that
// sends Settled, so by mailbox order a run's events are start, progress,
// end, even for a child that had already settled.
//
// Listener code never runs here: events are queued to each listener's own
// goroutine (package fanout), or, for a subscriber actor (registry.SendTo),
// sent from here to its PID as their protobuf messages (package messages),
// in the order they happen: the subscriber's mailbox is its queue, so it is
// isolated as a listener goroutine is. The actor watches each subscriber
// and drops one that stops, as if it had been released. A panic while handling a message is
// recovered in place; the listeners are told with subagent.ListenerFailed,
// since an event may be missing.
//
// Run actors do not live under it: a child's one tie to its parent's
// life is its start context (see registry's bind).
//
// A parent actor with nothing left to do (no run expected or live, no
// listener) tells the registry, which keeps it idle
// unless it has handed out a reference the actor has not used yet. The
// registry keeps a bounded number idle: past it, the oldest is rebound to
// the next new parent session (Rebind) or retired; a later subscription
// for its old agent gets another one.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package parent

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/subactor/subactor/actors/internal/inline"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/subagent"
)

// Props builds the parent actor of the agent whose session is parentID.
// The actor keeps listening at its number of listeners, so that sinks skip
// progress nobody would receive.
func Props(log *slog.Logger, parentID string, listening *atomic.Int32) *actor.Props {
	return inline.Props(func() actor.Actor {
		return &parentActor{id: parentID, log: log, listening: listening, live: map[string]*local.Published{}}
	})
}

type parentActor struct {
	id        string // the delegating agent's session id
	log       *slog.Logger
	listening *atomic.Int32
	listeners fanout.Fanout
	live      map[string]*local.Published       // started, not yet ended
	held      map[string][]subagent.RunProgress // expected runs' progress before Published; made on first use
	uses      int64
}

// Receive recovers a panic in place (A2): listeners are told an event may
// be missing and stay subscribed.
func (a *parentActor) Receive(c actor.Context) {
	msg := c.Message()
	defer a.crashed(msg)
	guard.Enter("parent", msg)
	a.receive(c, msg)
}

func (a *parentActor) crashed(msg any) {
	if p := recover(); p != nil {
		a.log.Error("subagent: parent actor crashed; listeners told to resynchronise", "parent", a.id, "message", fmt.Sprintf("%T", msg), "panic", p)
		if f, ok := msg.(guard.Failer); ok {
			f.Fail(fmt.Errorf("%w: parent actor crashed handling %T: %v", subagent.ErrServiceCrashed, msg, p))
		}
		a.listeners.Emit(subagent.ListenerFailed{Reason: fmt.Sprintf("parent actor crashed handling %T: %v", msg, p)})
		a.listening.Store(int32(a.listeners.Len()))
	}
}

func (a *parentActor) receive(c actor.Context, msg any) {
	if a.listeners.Handle(c, msg) {
		a.listening.Store(int32(a.listeners.Len()))
		a.idle(c)
		return
	}
	switch m := msg.(type) {
	case *local.Subscribe:
		a.uses++
		a.listeners.Add(c, m.Sub)
		a.listening.Store(int32(a.listeners.Len()))
	case *actor.Terminated:
		// A subscriber actor stopped: its subscriptions end without a
		// Release, so the registry is told, before any Idle.
		for range a.listeners.Drop(m.Who) {
			c.Send(c.Parent(), &local.Dropped{ParentID: a.id, PID: c.Self()})
		}
		a.listening.Store(int32(a.listeners.Len()))
		a.idle(c)
	case *local.Rebind:
		a.id, a.uses = m.ParentID, 0
	case *local.Expect:
		if a.held == nil {
			a.held = map[string][]subagent.RunProgress{}
		}
		a.held[m.RunID] = nil
	case *local.Published:
		a.uses++
		a.live[m.RunID] = m
		if a.listeners.Len() > 0 {
			a.listeners.Emit(subagent.RunStarted{RunID: m.RunID, Provider: m.Provider, SessionID: m.SessionID, Local: m.Local, Task: m.Task})
		}
		for _, p := range a.held[m.RunID] {
			a.listeners.Emit(p)
		}
		delete(a.held, m.RunID)
	case *local.Discarded:
		a.uses++
		delete(a.held, m.RunID)
		a.idle(c)
	case *local.Progress:
		id := m.Event.RunID
		if a.live[id] != nil {
			a.listeners.Emit(m.Event)
		} else if held, pending := a.held[id]; pending {
			a.held[id] = append(held, m.Event)
		}
		// Otherwise the run has ended or was discarded: its stream is
		// closed, and a late event from a misbehaving provider is dropped.
	case *local.Settled:
		a.end(m)
		a.idle(c)
	case *actor.Stopping:
		a.listeners.Close(c)
	}
}

func (a *parentActor) end(s *local.Settled) {
	p, ok := a.live[s.RunID]
	if !ok {
		return // Published always comes first; nothing else sends Settled
	}
	delete(a.live, s.RunID)
	if a.listeners.Len() == 0 {
		return // nobody to tell: no event to build (and allocate)
	}
	reason := s.Result.StopReason
	if s.Err != nil {
		reason = subagent.Error // an infrastructure fault ends as error
	}
	a.listeners.Emit(subagent.RunEnded{
		RunID: p.RunID, Provider: p.Provider, SessionID: p.SessionID, Local: p.Local,
		StopReason:           reason,
		LastAssistantMessage: subagent.TextOf(s.Result.Output),
		Usage:                s.Result.Usage,
		Result:               s.Result,
	})
}

// idle offers the registry to retire this actor once nothing is left.
func (a *parentActor) idle(c actor.Context) {
	if len(a.live) == 0 && len(a.held) == 0 && a.listeners.Len() == 0 {
		c.Send(c.Parent(), &local.Idle{ParentID: a.id, Uses: a.uses, PID: c.Self()})
	}
}
