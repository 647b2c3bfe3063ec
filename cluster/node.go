package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// kindPrefix names a member kind per offered provider: a member advertises
// the providers it runs as its cluster kinds. No '/': protoactor's
// identity lookup splits a grain's key (kind/identity) at the first.
const kindPrefix = "subactor.provider:"

// Member is one node of the cluster as membership sees it.
type Member struct {
	ID        string
	Address   string // host:port of its actors
	Providers []string
	// Capabilities are each offered provider's start-time features, as
	// the member advertises them (a provider it offers without
	// advertising any declares none).
	Capabilities map[string]subagent.Capabilities
	// Capacity and Runs are its room for hosted runs and those it
	// hosts, as it last gossiped them (a gossip round old at most, so
	// the member's own admission has the last word).
	Capacity, Runs int64
}

// Offers reports whether m runs provider.
func (m Member) Offers(provider string) bool { return slices.Contains(m.Providers, provider) }

// Node is this process's member of a cluster: it hosts runs of its
// providers for peers (their Remote provider places them here) and lets
// this process's own Remote providers place runs on peers.
type Node struct {
	cfg     Config
	sys     *actors.System
	cl      *cluster.Cluster
	host    *actor.PID
	health  *http.Server                     // the static list's membership endpoint
	creds   credentials.TransportCredentials // how this node dials its peers
	leave   sync.Once
	ownsSys bool // Start made sys, so a failed Start stops it

	// topology is the membership as of the last event, states each
	// member's gossiped state; members are those of the topology whose
	// state is known, listed is every id of the topology. changed is
	// closed and replaced at each change. protoactor's own member list
	// is read without its lock, so the node keeps this copy.
	mu        sync.Mutex
	topology  []*cluster.Member
	states    map[string]*messages.MemberState
	members   []Member
	listed    map[string]bool
	refused   map[string]bool // members whose refused advertisement was logged
	answered  map[string]bool // members whose host answered this node (gossip.go)
	changed   chan struct{}
	grainIdle time.Duration // grain.go's grainIdle, shorter in tests
	// done is closed as the node stops; asking counts the goroutines
	// asking a member's state (gossip.go), which end then.
	done   chan struct{}
	asking sync.WaitGroup
	load   loadGossip // the host's load, published (gossip.go)
}

// Start joins (or forms) the cluster. It returns once this node is a
// member; peers appear as membership finds them (WaitMembers). It fails,
// naming what it could not reach, once cfg.JoinTimeout passed or ctx
// ended.
func Start(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer cancel()
	host, port, _ := hostPort(cfg.Listen, "listen address")
	if port != 0 {
		// protoactor panics on a port it cannot bind: the error, typed
		// (an *net.OpError wrapping syscall.EADDRINUSE, say), comes from
		// a bind of our own first.
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("cluster: listen address %s: %w", cfg.Listen, err)
		}
		l.Close()
	}
	n = &Node{cfg: cfg, sys: cfg.System, changed: make(chan struct{}), creds: insecure.NewCredentials(), states: map[string]*messages.MemberState{}, refused: map[string]bool{}, answered: map[string]bool{}, done: make(chan struct{}), grainIdle: grainIdle}
	serverOpts := n.inboundOptions()
	var opts []remote.ConfigOption
	var server, client *tls.Config
	if cfg.TLS != nil {
		server, client, err = cfg.TLS.tlsConfigs()
		if err != nil {
			return nil, err
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(server)))
		n.creds = credentials.NewTLS(client)
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(n.creds)))
	}
	opts = append(opts, remote.WithServerOptions(serverOpts...))
	if n.sys == nil {
		var sysOpts []actors.Option
		if cfg.Logger != nil {
			sysOpts = append(sysOpts, actors.WithLogger(clusterwire.QuietLogger(cfg.Logger)))
		}
		n.sys, n.ownsSys = actors.NewSystem(sysOpts...), true
	}
	started := n       // an error return sets n to nil
	abandoned := false // a join given up on: its own goroutine cleans up
	defer func() {
		if err != nil && started.ownsSys && !abandoned {
			started.sys.Shutdown()
		}
	}()

	var provider cluster.ClusterProvider
	if len(cfg.Etcd) > 0 {
		// An unreachable etcd is named here, within the bound.
		if err = probeEtcd(ctx, cfg.Etcd); err == nil {
			provider, err = newEtcdMembers(n, "/subactor")
		}
		if err != nil {
			err = fmt.Errorf("cluster: could not reach etcd at %s: %w", strings.Join(cfg.Etcd, ","), err)
		}
	} else {
		provider, err = newStaticMembers(n, server, client)
	}
	if err != nil {
		return nil, err
	}
	// A provider's kind advertises it, and its grains are its
	// continuable children (grain.go).
	var kinds []*cluster.Kind
	grain := actor.PropsFromProducer(func() actor.Actor { return childGrain{n} })
	for _, p := range cfg.Providers {
		kinds = append(kinds, cluster.NewKind(kindPrefix+p.Name(), grain))
	}
	ccfg := cluster.Configure(cfg.Name, provider, disthash.New(),
		remote.Configure(host, port, opts...), cluster.WithKinds(kinds...))
	n.cl = cluster.New(n.sys.ActorSystem(), ccfg)
	n.load.every, n.load.publish = n.cl.Config.GossipInterval, n.publish
	n.sys.ActorSystem().EventStream.Subscribe(func(ev any) {
		switch ev := ev.(type) {
		case *cluster.ClusterTopology:
			n.setMembers(ev.Members)
		case *cluster.GossipUpdate:
			n.gossiped(ev)
		}
	})
	if err := n.startMember(ctx); err != nil {
		abandoned = errors.Is(err, errJoinAbandoned)
		return nil, err
	}
	// The host's Receive never blocks (a start's provider runs on a
	// goroutine of its own), so it runs on the goroutine that delivers
	// the message, protoactor's remote reader for a peer's: one goroutine
	// hand-off fewer on every remote start and command (bench remote-run).
	hostProps := actor.PropsFromProducer(func() actor.Actor { return newHost(n) }, actor.WithDispatcher(actor.NewSynchronizedDispatcher(hostThroughput)))
	n.host, err = n.sys.ActorSystem().Root.SpawnNamed(hostProps, clusterwire.HostName)
	if err != nil {
		n.cl.Shutdown(false) // stops the actor system too
		n.ownsSys = false
		return nil, fmt.Errorf("cluster: host actor: %w", err)
	}
	// Listed once its host takes starts.
	n.load.changed(0)
	return n, nil
}

var errJoinAbandoned = errors.New("cluster: joining given up")

// startMember runs protoactor's StartMember, which panics where it could
// return an error (a port in use, etcd unreachable) and takes no context:
// when ctx ends first, the join is given up and the node stopped once
// StartMember returns.
func (n *Node) startMember(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("cluster: joining: %v", r)
			}
		}()
		n.cl.StartMember()
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil && n.health != nil {
			n.health.Close()
		}
		return err
	case <-ctx.Done():
		go func() {
			switch {
			case <-done == nil:
				n.stop() // its actor system too
			case n.ownsSys:
				n.sys.Shutdown()
			}
			if n.health != nil {
				n.health.Close()
			}
		}()
		return fmt.Errorf("%w (%s): %w", errJoinAbandoned, n.cfg.Listen, context.Cause(ctx))
	}
}

// probeEtcd reads etcd once, within ctx.
func probeEtcd(ctx context.Context, endpoints []string) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Get(ctx, "/subactor", clientv3.WithCountOnly())
	return err
}

// ID is this member's id.
func (n *Node) ID() string { return n.sys.ActorSystem().ID }

// Address is the host:port this node's actors are reached at.
func (n *Node) Address() string { return n.sys.ActorSystem().Address() }

// LossBound is how long, at most, a member that died or froze stays in
// this node's topology, plus a margin for scheduling on a loaded machine:
// the bound within which a caller's run on that member settles error
// (K2).
func (n *Node) LossBound() time.Duration { return lossBound(len(n.cfg.Etcd) > 0) }

// System is the node's actor runtime: a Remote provider's proxies live
// on it, since only it is reachable from peers.
func (n *Node) System() *actors.System { return n.sys }

func (n *Node) logger() *slog.Logger { return n.sys.ActorSystem().Logger() }

func (n *Node) setMembers(live []*cluster.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	in := func(id string) bool {
		return slices.ContainsFunc(live, func(m *cluster.Member) bool { return m.Id == id })
	}
	for _, old := range n.topology {
		if !in(old.Id) {
			n.logger().Info("cluster: member left", "member", old.Id, "address", old.Address())
		}
	}
	// A member's state outlives a gap in the topology: gossip sends it
	// once, not again when the member reappears. States of members gone
	// are dropped only beyond a bound (ids are per process, so they pile
	// up as nodes restart).
	if len(n.states) > 2*len(live)+maxGoneStates {
		for id := range n.states {
			if !in(id) && id != n.ID() {
				delete(n.states, id)
				delete(n.refused, id)
				delete(n.answered, id)
			}
		}
	}
	n.topology = live
	n.rebuild()
}

// maxGoneStates bounds the states kept of members that left.
const maxGoneStates = 64

// rebuild lists the members of the topology that can be placed by (see
// Members), with what they advertise, asks each newly joined member
// offering providers for its state, and tells the waiters. n.mu is held.
func (n *Node) rebuild() {
	var ms []Member
	listed := map[string]bool{}
	for _, m := range n.topology {
		listed[m.Id] = true
		// A member offering providers is listed once its host answered
		// (gossip.go): runs are placed on it. One offering none (a
		// caller) is listed as it joined, and asked nothing.
		offers := m.Id != n.ID() && slices.ContainsFunc(m.Kinds, func(k string) bool { return strings.HasPrefix(k, kindPrefix) })
		if offers && !n.listed[m.Id] {
			select {
			case <-n.done:
			default:
				n.asking.Add(1)
				go n.ask(m)
			}
		}
		st, ok := n.states[m.Id]
		switch {
		case !offers && !ok:
			st = &messages.MemberState{}
		case !ok || offers && !n.answered[m.Id]:
			continue // nothing to place by yet
		}
		provs, caps, err := parseAdvertisement(m.Kinds, st)
		if err != nil {
			// Listed, so its runs' callers are known, but offering
			// nothing: no run is placed on what it misstates (K3).
			if !n.refused[m.Id] {
				n.refused[m.Id] = true
				n.logger().Warn("cluster: a member's advertisement is refused; it offers nothing", "member", m.Id, "err", err)
			}
			st = &messages.MemberState{}
		}
		slices.Sort(provs)
		ms = append(ms, Member{ID: m.Id, Address: m.Address(), Providers: provs, Capabilities: caps, Capacity: st.GetCapacity(), Runs: st.GetRuns()})
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	n.members, n.listed = ms, listed
	close(n.changed)
	n.changed = make(chan struct{})
}

// Members lists the live members, this one included, in id order: those
// membership lists that answered this node and whose state (gossiped, or
// in that answer) has reached it.
func (n *Node) Members() []Member {
	ms, _ := n.snapshot()
	return ms
}

func (n *Node) snapshot() ([]Member, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members, n.changed
}

// Heard reports whether every live member is listed by Members: it
// answered this node, and its state reached it.
func (n *Node) Heard() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.members) == len(n.listed)
}

// isMember reports whether the member id is live, heard from or not.
func (n *Node) isMember(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listed[id]
}

// WaitMembers returns once ok holds for the live members, or ctx's
// error. Each topology change is checked, so a waiter never polls.
func (n *Node) WaitMembers(ctx context.Context, ok func([]Member) bool) ([]Member, error) {
	for {
		ms, changed := n.snapshot()
		if ok(ms) {
			return ms, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ms, ctx.Err()
		}
	}
}

// providerNames lists the names of the providers this node offers.
func (n *Node) providerNames() []string {
	var names []string
	for _, p := range n.cfg.Providers {
		names = append(names, p.Name())
	}
	return names
}

func (n *Node) provider(name string) subagent.Provider {
	for _, p := range n.cfg.Providers {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// providerStopWait bounds the wait for the membership provider's end.
const providerStopWait = 500 * time.Millisecond

// Stop stops the node at once, for a node that hosts nothing (a caller
// whose runs are all disposed): peers drop it at their next membership
// round (etcd: at once, its key deleted). Its actor system stops too.
// Idempotent with Leave.
func (n *Node) Stop() { n.leave.Do(n.stop) }

// stop ends membership and the node's runtime without protoactor's
// graceful shutdown, which sleeps two seconds for grain ownership
// transfers (a node has no grains: its kinds only advertise providers)
// and waits up to ten for gRPC streams that peers keep open.
func (n *Node) stop() {
	n.load.stop()
	n.mu.Lock()
	close(n.done)
	n.mu.Unlock()
	defer n.asking.Wait()
	// A non-graceful cluster shutdown leaves the provider's membership
	// loop running: end it first (etcd: the member's key is deleted,
	// waited for providerStopWait at most: with etcd down, its lease ends
	// it).
	shut := make(chan struct{})
	go func() {
		_ = n.cl.Config.ClusterProvider.Shutdown(false)
		close(shut)
	}()
	select {
	case <-shut:
	case <-time.After(providerStopWait):
	}
	n.cl.Shutdown(false)
	if n.health != nil {
		n.health.Close()
	}
}

// Leave leaves the cluster gracefully: the runs this node hosts are
// cancelled and disposed, and their callers told (each hosted run ends
// once its caller acknowledged its result and quiescence, or is gone),
// then the node stops as Stop does, its actor system with it
// (Config.System included: do not shut that down after Leave).
// Idempotent; it returns when done or when ctx ends (the node then stops
// at once).
func (n *Node) Leave(ctx context.Context) {
	n.leave.Do(func() {
		done := make(chan struct{})
		n.sys.ActorSystem().Root.Send(n.host, leaveHosted{done: done})
		select {
		case <-done:
		case <-ctx.Done():
		}
		n.stop()
	})
}
