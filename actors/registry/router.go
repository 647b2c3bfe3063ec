package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/reply"
)

// Commands to the router actor, which routes follow-ups to continuable
// children for the whole Service: one mailbox, one route per child id.
type (
	// followUp asks how to deliver a follow-up; to is answered once with
	// a routeAnswer (see route).
	followUp struct {
		childID, owner string
		w              waiterID
		to             *reply.To
		front          bool
	}
	// routeEvent feeds an activation's news to its child's route.
	routeEvent struct {
		childID string
		in      routeInput
	}
	// liveTasks is answered with every current activation's task, for
	// Close to kill.
	liveTasks struct{ reply.To }
)

// ownedTask is an activation's task with the parent that owns it.
type ownedTask struct{ owner, task string }

type childRoute struct {
	route
	owner string
}

type routerActor struct {
	routes  map[string]*childRoute
	waiters map[waiterID]*reply.To
}

func (a *routerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *followUp:
		r := a.routes[m.childID]
		if r == nil {
			r = &childRoute{owner: m.owner}
			a.routes[m.childID] = r
		}
		a.waiters[m.w] = m.to
		a.carry(m.childID, r, r.step(inFollowUp{w: m.w, front: m.front}))
	case routeEvent:
		if r := a.routes[m.childID]; r != nil {
			a.carry(m.childID, r, r.step(m.in))
		}
	case *liveTasks:
		var out []ownedTask
		for _, r := range a.routes {
			if r.task != "" {
				out = append(out, ownedTask{owner: r.owner, task: r.task})
			}
		}
		m.Answer(out)
	}
}

// carry answers what a route step released and forgets an idle route.
func (a *routerActor) carry(childID string, r *childRoute, out []routeAnswer) {
	for _, ans := range out {
		if to := a.waiters[ans.w]; to != nil {
			delete(a.waiters, ans.w)
			to.Answer(ans)
		}
	}
	if r.idle() {
		delete(a.routes, childID)
	}
}
