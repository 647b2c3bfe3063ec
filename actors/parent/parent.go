// Package parent is the parent actor: one per delegating agent. It owns the
// run events of that agent's children and their listeners.
//
// It is the sequencer of subagent/start and subagent/end: the Service sends
// Published after a start succeeded and only then attaches the result
// observer that sends Settled, so by mailbox order start precedes end even
// for a child that had already settled. A Settled that somehow arrives for an
// unpublished run is held until its Published.
package parent

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Subscribe adds a listener; answered with its listener actor's PID.
// A local command: it carries a Go function.
type Subscribe struct{ Listener subagent.Listener }

// Unsubscribe removes a listener; answered with its listener actor's PID
// (nil if unknown), which the caller drains.
type Unsubscribe struct{ ID string }

// Props builds a parent actor.
func Props(log *slog.Logger) *actor.Props {
	return inline.Props(func() actor.Actor {
		return &parentActor{
			listeners: fanout.New(log),
			live:      map[string]*messages.Published{},
			early:     map[string]*messages.Settled{},
		}
	})
}

type parentActor struct {
	listeners *fanout.Fanout
	live      map[string]*messages.Published // started, not yet ended
	early     map[string]*messages.Settled   // settled before published
}

func (a *parentActor) Receive(c actor.Context) {
	msg := c.Message()
	if a.listeners.Delivered(c, msg) {
		return
	}
	switch m := msg.(type) {
	case *Subscribe:
		c.Respond(a.listeners.PID(a.listeners.Add(c, m.Listener)))
	case *Unsubscribe:
		c.Respond(a.listeners.Remove(m.ID))
	case *messages.Published:
		a.live[m.RunId] = m
		a.listeners.Emit(c, &messages.RunStarted{RunId: m.RunId, Provider: m.Provider, Id: m.Id, Local: m.Local})
		if s, ok := a.early[m.RunId]; ok {
			delete(a.early, m.RunId)
			a.end(c, s)
		}
	case *messages.Settled:
		if _, ok := a.live[m.RunId]; ok {
			a.end(c, m)
		} else {
			a.early[m.RunId] = m
		}
	}
}

func (a *parentActor) end(c actor.Context, s *messages.Settled) {
	p := a.live[s.RunId]
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
