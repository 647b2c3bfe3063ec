package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/messages"
)

// stateKey is the gossip key under which each member keeps its
// messages.MemberState: its providers' capabilities and its load. Callers
// place runs by it without asking each member (K1).
const stateKey = "subactor.member"

// undecodable stands for a peer's state that did not decode.
var undecodable = &messages.MemberState{Capacity: -1}

// ownState is this node's state with runs hosted runs.
func (n *Node) ownState(runs int) *messages.MemberState {
	st := &messages.MemberState{Capacity: int64(n.cfg.Capacity), Runs: int64(runs)}
	for _, p := range n.cfg.Providers {
		c := p.Capabilities()
		st.Providers = append(st.Providers, &messages.ProviderOffer{
			Name: p.Name(), OutputSchema: c.OutputSchema, DepthLimit: c.DepthLimit, ToolFilter: c.ToolFilter, Persona: c.Persona,
		})
	}
	return st
}

// loadGossip coalesces the host's load into at most one publication a
// gossip interval. Gossip sends a member's state once an interval, so a
// state set more often is never seen, and every publication costs the
// gossip actor an encoding on the host's cores, two a remote delegation
// (its start and its end): with this and the host's inline Receive, the
// CPU of a remote delegation over both processes fell from 124 to 104 µs
// (bench remote). Callers do not wait for it: each answer of this host's
// carries its load (remote.heard).
type loadGossip struct {
	every   time.Duration // the gossip interval
	publish func(runs int)

	mu      sync.Mutex
	runs    int
	last    time.Time   // of the last publication
	pending *time.Timer // publishes runs at the interval's end
	stopped bool
}

// changed publishes the host's new count of runs now, when nothing was
// published for an interval, or else at the interval's end (the count as
// it is then).
func (g *loadGossip) changed(runs int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs = runs
	if g.stopped || g.pending != nil {
		return
	}
	wait := time.Until(g.last.Add(g.every))
	if wait <= 0 {
		g.now()
		return
	}
	g.pending = time.AfterFunc(wait, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.pending = nil
		if !g.stopped {
			g.now()
		}
	})
}

// now publishes the count; g.mu is held, so publications keep their order.
func (g *loadGossip) now() {
	g.last = time.Now()
	g.publish(g.runs)
}

// stop ends the publications as the node stops.
func (g *loadGossip) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.pending != nil {
		g.pending.Stop()
	}
}

// publish gossips this node's state with runs hosted runs, and lists it
// so here at once (gossip reports peers' states only). Once this node is
// listed, a new load only updates its entry (see loadGossip).
func (n *Node) publish(runs int) {
	st := n.ownState(runs)
	n.cl.Gossip.SetState(stateKey, st)
	n.mu.Lock()
	defer n.mu.Unlock()
	_, before := n.states[n.ID()]
	n.states[n.ID()] = st
	i := slices.IndexFunc(n.members, func(m Member) bool { return m.ID == n.ID() })
	if !before || i < 0 {
		n.rebuild()
		return
	}
	ms := slices.Clone(n.members) // Members' callers keep the old one
	ms[i].Runs = st.GetRuns()
	n.members = ms
	close(n.changed)
	n.changed = make(chan struct{})
}

// gossiped takes a peer's state as gossip merged it. One that does not
// decode is logged and kept as undecodable, a state parseAdvertisement
// refuses, so that its member is listed offering nothing (K3).
func (n *Node) gossiped(u *cluster.GossipUpdate) {
	if u.Key != stateKey || u.MemberID == n.ID() {
		return
	}
	st := &messages.MemberState{}
	if err := u.Value.UnmarshalTo(st); err != nil {
		n.logger().Warn("cluster: a member's gossiped state is refused; it offers nothing", "member", u.MemberID, "err", err)
		st = undecodable
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.states[u.MemberID] = st
	n.rebuild()
}

// askRetry spaces the queries of a member that has not answered yet,
// and askTimeout bounds each.
const (
	askRetry   = 250 * time.Millisecond
	askTimeout = 500 * time.Millisecond
)

// ask asks the host of a member that joined for its state until it
// answers, the member left or the node stops. A member is listed once it
// answered: its answer proves that what it sends reaches this node (a
// node that joins on the address of one that left is reached only once
// its peers replaced their connections to the earlier one, and what they
// send before that is lost), and gives its state when gossip has not
// brought it yet (gossip can lag a join by seconds).
func (n *Node) ask(m *cluster.Member) {
	defer n.asking.Done()
	sys := n.sys.ActorSystem()
	for {
		reply, err := sys.Root.RequestFuture(clusterwire.Host(m.Address()), &messages.HostStatus{}, askTimeout).Result()
		l, ok := reply.(*messages.HostLoad)
		n.mu.Lock()
		switch {
		case !n.listed[m.Id]:
			n.mu.Unlock()
			return
		case err == nil && ok && l.GetNode() == m.Id:
			n.answered[m.Id] = true
			if _, heard := n.states[m.Id]; !heard {
				n.states[m.Id] = l.GetState()
				if l.GetState() == nil {
					n.states[m.Id] = undecodable // a node of another version
				}
			}
			n.rebuild()
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		select {
		case <-n.done:
			return
		case <-time.After(askRetry):
		}
	}
}
