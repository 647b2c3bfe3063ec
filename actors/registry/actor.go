package registry

import (
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/subagent"
)

// Commands to the registry actor. They carry Go values (providers,
// listeners), so they are local plain structs, each answered once on its
// reply.To.
type (
	register struct {
		reply.To
		p subagent.Provider
	}
	unregister struct {
		reply.To
		name string
		gen  uint64
	}
	getProvider struct {
		reply.To
		name string
	}
	listNames struct{ reply.To }
	// prepare is answered with itself, p set to the provider registered
	// under name and, when there is one and the parent session has a
	// subscription, ref to its parentRef, counting the reference (one
	// round trip instead of two, and no answer to allocate). A run of a
	// parent nobody listens to has no events to deliver: it takes no
	// parent actor, and a subscription made later hears only later runs.
	prepare struct {
		reply.To
		name, parentID string
		p              subagent.Provider // nil when none is registered under the name
		ref            *parentRef        // nil when p is, or when nobody listens
	}
	// parentOf subscribes sub to a parent session's runs and returns its
	// parentRef, counting the subscription. The registry sends the parent
	// actor the Subscribe itself, before it handles any later prepare: a
	// run prepared after the subscription is heard from its start, one
	// prepared before it not at all. The ref's pid and listening are
	// fixed, safe to read.
	parentOf struct {
		reply.To
		parentID string
		sub      *fanout.Sub
	}
	// unsubscribed: a subscription that parentOf counted was released.
	// It is sent before the parent actor's Unsubscribe, so it is handled
	// before the Idle that may follow that.
	unsubscribed struct{ ref *parentRef }
	// listen subscribes a listener to provider events after replaying the
	// current providers to it.
	listen struct {
		reply.To
		sub *fanout.Sub
	}
)

type registered struct {
	gen uint64 // answered to register, so a release removes only its own
	err error
}

type entry struct {
	p   subagent.Provider
	gen uint64
}

// registryActor owns the providers in insertion order, the parent actors by
// parent session id, and the service-wide listeners. Its mailbox orders
// registration against starts (S1): a start that prepared before an
// unregister proceeds, a later one finds no provider.
type registryActor struct {
	log       *slog.Logger
	order     []string
	providers map[string]entry
	gen       uint64
	parents   map[string]*parentRef
	idle      idleList
	maxIdle   int
	listeners fanout.Fanout
}

// parentRef is a live parent actor and how many references to it were
// handed out.
type parentRef struct {
	pid       *actor.PID
	listening atomic.Int32 // kept by the parent actor: its listener count
	refs      int64
	// subscriptions counts those not yet released: while there are any,
	// starts hand out references; the actor is not idle meanwhile, even
	// if an overflow detached every listener.
	subscriptions int
	id            string     // the parent session it serves
	idle          bool       // in the idle list
	prev          *parentRef // its neighbours there, older and newer
	next          *parentRef
}

// idleList is the idle parents, oldest first, linked through the refs
// themselves: a parent goes idle after every run, and an element
// allocated each time was garbage each time.
type idleList struct {
	oldest, newest *parentRef
	n              int
}

func (l *idleList) push(p *parentRef) {
	p.idle, p.prev, p.next = true, l.newest, nil
	if l.newest != nil {
		l.newest.next = p
	} else {
		l.oldest = p
	}
	l.newest = p
	l.n++
}

func (l *idleList) remove(p *parentRef) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		l.oldest = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		l.newest = p.prev
	}
	p.idle, p.prev, p.next = false, nil, nil
	l.n--
}

// popOldest removes and returns the oldest idle parent.
func (l *idleList) popOldest() *parentRef {
	p := l.oldest
	l.remove(p)
	return p
}

// Receive recovers a panic in place (A2): the command being handled is
// answered with the crash, the state stays, and listeners are told.
func (a *registryActor) Receive(c actor.Context) {
	msg := c.Message()
	defer a.crashed(msg)
	guard.Enter("registry", msg)
	a.receive(c, msg)
}

func (a *registryActor) crashed(msg any) {
	p := recover()
	if p == nil {
		return
	}
	err := fmt.Errorf("%w: registry crashed handling %T: %v", subagent.ErrServiceCrashed, msg, p)
	a.log.Error("subagent: registry actor crashed", "err", err)
	if f, ok := msg.(guard.Failer); ok {
		f.Fail(err)
	}
	a.listeners.Emit(subagent.ListenerFailed{Reason: err.Error()})
}

func (a *registryActor) receive(c actor.Context, msg any) {
	if a.listeners.Handle(c, msg) {
		return
	}
	switch m := msg.(type) {
	case *register:
		name := m.p.Name()
		if _, dup := a.providers[name]; dup {
			m.Answer(registered{err: fmt.Errorf("%w %q", subagent.ErrDuplicateProvider, name)})
			return
		}
		a.gen++
		a.providers[name] = entry{m.p, a.gen}
		a.order = append(a.order, name)
		a.listeners.Emit(subagent.ProviderAdded{Provider: name})
		m.Answer(registered{gen: a.gen})
	case *unregister:
		if e, ok := a.providers[m.name]; ok && e.gen == m.gen {
			delete(a.providers, m.name)
			a.order = slices.DeleteFunc(a.order, func(n string) bool { return n == m.name })
			a.listeners.Emit(subagent.ProviderRemoved{Name: m.name})
		}
		m.Answer(struct{}{})
	case *getProvider:
		m.Answer(a.providers[m.name].p)
	case *listNames:
		m.Answer(append([]string(nil), a.order...))
	case *prepare:
		if e, ok := a.providers[m.name]; ok {
			m.p = e.p
			if p := a.parents[m.parentID]; p != nil && p.subscriptions > 0 {
				m.ref = a.parent(c, m.parentID)
			}
		}
		m.Answer(m)
	case *parentOf:
		p := a.parent(c, m.parentID)
		p.subscriptions++
		c.Send(p.pid, &local.Subscribe{Sub: m.sub})
		m.Answer(p)
	case *unsubscribed:
		m.ref.subscriptions--
	case *local.Dropped:
		if p, ok := a.parents[m.ParentID]; ok && p.pid.Equal(m.PID) {
			p.subscriptions--
		}
	case *actor.Terminated:
		a.listeners.Drop(m.Who) // a subscriber actor of Listen, or a retired parent
	case *local.Idle:
		// It is idle only if every reference handed out has reached it: a
		// start or subscription in flight will find it still alive.
		if p, ok := a.parents[m.ParentID]; ok && p.pid.Equal(m.PID) && p.refs == m.Uses && p.subscriptions == 0 && !p.idle {
			a.idle.push(p)
			for a.idle.n > a.maxIdle {
				old := a.idle.popOldest()
				c.Stop(old.pid)
				delete(a.parents, old.id)
			}
		}
	case *listen:
		// Replaying the current providers to the new listener, in order and
		// before any later change, lets a consumer follow registrations
		// whatever order it and the providers were loaded in (E4).
		a.listeners.Add(c, m.sub)
		for _, name := range a.order {
			a.listeners.EmitTo(m.sub, subagent.ProviderAdded{Provider: name})
		}
		m.Answer(struct{}{})
	case *actor.Stopping:
		a.listeners.Close(c)
	}
}

// parent hands out a reference to the parent actor for a parent session,
// spawning it when there is none.
func (a *registryActor) parent(c actor.Context, id string) *parentRef {
	p, ok := a.parents[id]
	if !ok {
		if p = a.recycle(c, id); p == nil {
			p = &parentRef{id: id}
			p.pid = c.Spawn(parent.Props(a.log, id, &p.listening))
		}
		a.parents[id] = p
	}
	if p.idle {
		a.idle.remove(p)
	}
	p.refs++
	return p
}

// recycle hands the oldest idle parent actor over to the parent session
// id when no more may stay idle, or returns nil. The actor is quiescent
// (every reference handed out reached it, and nothing runs under it), so
// rebinding it is safe, and it saves the spawn of a new actor and, once
// that one goes idle, the stop of the oldest: a Service whose parents are
// mostly new sessions (one per request) would otherwise pay both per
// session.
func (a *registryActor) recycle(c actor.Context, id string) *parentRef {
	if a.maxIdle == 0 || a.idle.n < a.maxIdle {
		return nil
	}
	p := a.idle.popOldest()
	delete(a.parents, p.id)
	p.id, p.refs = id, 0
	// Before any message from the reference about to be handed out.
	c.Send(p.pid, &local.Rebind{ParentID: id})
	return p
}
