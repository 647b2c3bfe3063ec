// Package parent is the parent actor: one per delegating agent. It owns the
// run events of that agent's children and their listeners.
//
// It is the sequencer of subagent/start and subagent/end: the Service sends
// Published after a start succeeded and only then attaches the result
// observer that sends Settled to the same actor, so by mailbox order start
// precedes end even for a child that had already settled.
//
// A parent actor with nothing left to do tells the registry, which retires
// it unless it has handed out a reference the actor has not used yet; a
// later start or subscription for the same agent gets a fresh one.
package parent

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Subscribe adds a listener; answered with its listener actor's PID.
// A local command: it carries a Go function.
type Subscribe struct {
	reply.To
	Listener subagent.Listener
}

// Unsubscribe removes a listener; answered with its listener actor's PID
// (nil if unknown), which the caller drains.
type Unsubscribe struct {
	reply.To
	ID string
}

// Props builds the parent actor of the agent with id parentID.
func Props(log *slog.Logger, parentID string) *actor.Props {
	return inline.Props(func() actor.Actor {
		return &parentActor{
			id:        parentID,
			listeners: fanout.New(log),
			live:      map[string]*messages.Published{},
			draining:  map[string]bool{},
		}
	})
}

type parentActor struct {
	id        string // the delegating agent's
	listeners *fanout.Fanout
	live      map[string]*messages.Published // started, not yet ended
	draining  map[string]bool                // removed listeners not yet stopped
	uses      int64                          // Published and Subscribe received
}

func (a *parentActor) Receive(c actor.Context) {
	msg := c.Message()
	if a.listeners.Delivered(c, msg) {
		return
	}
	switch m := msg.(type) {
	case *Subscribe:
		a.uses++
		m.Answer(a.listeners.PID(a.listeners.Add(c, m.Listener)))
	case *Unsubscribe:
		pid := a.listeners.Remove(m.ID)
		if pid != nil {
			a.draining[pid.Id] = true
		}
		m.Answer(pid)
	case *actor.Terminated:
		delete(a.draining, m.Who.Id)
		a.idle(c)
	case *messages.Published:
		a.uses++
		a.live[m.RunId] = m
		a.listeners.Emit(c, &messages.RunStarted{RunId: m.RunId, Provider: m.Provider, Id: m.Id, Local: m.Local})
	case *messages.Settled:
		a.end(c, m)
		a.idle(c)
	}
}

func (a *parentActor) end(c actor.Context, s *messages.Settled) {
	p, ok := a.live[s.RunId]
	if !ok {
		return // Published always comes first; nothing else sends Settled
	}
	delete(a.live, s.RunId)
	reason := s.Result.GetStopReason()
	if s.Error != "" {
		reason = string(subagent.Error) // an infrastructure fault ends as error
	}
	a.listeners.Emit(c, &messages.RunEnded{
		RunId: p.RunId, Provider: p.Provider, Id: p.Id, Local: p.Local,
		StopReason:           reason,
		LastAssistantMessage: subagent.TextOf(messages.ToContent(s.Result.GetOutput())),
	})
}

// idle offers the registry to retire this actor once nothing is left.
func (a *parentActor) idle(c actor.Context) {
	if len(a.live) == 0 && len(a.draining) == 0 && a.listeners.Len() == 0 {
		c.Request(c.Parent(), &messages.ParentIdle{ParentId: a.id, Uses: a.uses}) // the sender names it
	}
}
