// Package remote is the provider of runs placed on other cluster nodes
// (P4, K1). The provider New makes, named like a provider its peers offer (qwen, say)
// places each run on a live member offering it, least loaded first; the
// run is a run actor on that node, which this node's client actor
// commands by its PID, and it satisfies the same Run contract as a local
// child (R1–R4): the Service's run id, no
// local agent (so events say local=false), progress in order, steer
// admitted or refused, cancel, and a Dispose that returns once the hosting
// node reports the child quiesced (its agent process reaped). Everything
// crosses the network as the protobuf messages of package messages.
//
// A continuable child's log is kept by its hosting node's provider;
// Resume continues it on a member that can read that log (any member,
// when they share one store), so a child outlives its node (K2, S8).
//
// Losing the hosting node (killed, frozen, partitioned: whatever makes
// membership drop it) settles the run with stop reason error and a cause
// naming the node, within its Node.LossBound; every waiter is answered.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Errors of placement, matched with errors.Is.
var (
	// ErrNoMember: no live member offers the provider.
	ErrNoMember = errors.New("remote: no member offers the provider")
	// ErrNoRoom: every member offering the provider is at its capacity.
	ErrNoRoom = errors.New("remote: no member has room")
	// ErrRefused: the hosting node refused the request (invalid, unknown
	// provider, foreign run).
	ErrRefused = errors.New("remote: refused by the hosting node")
	// ErrNodeLost: the hosting node left the cluster or stopped answering.
	ErrNodeLost = errors.New("remote: hosting node lost")
)

// placementError says why no member took a start, member by member.
type placementError struct {
	Provider string
	Reasons  []string // one per member tried
	noRoom   bool
	// notYet: a member does not count this node as a member yet, or did
	// not answer a start: worth another round.
	notYet bool
	// unsupported: members offer the provider, none with every feature
	// the request uses (the first such member's refusal).
	unsupported error
	// noSession: a member that answered had no log of the child to
	// resume (its store is its own, not the one the child was kept in).
	noSession bool
}

func (e *placementError) Error() string {
	if e.unsupported != nil && len(e.Reasons) == 0 {
		return fmt.Sprintf("remote: no live member offering provider %q supports the request: %v", e.Provider, e.unsupported)
	}
	if len(e.Reasons) == 0 {
		return fmt.Sprintf("remote: no live member offers provider %q", e.Provider)
	}
	return fmt.Sprintf("remote: no member took a run of provider %q: %s", e.Provider, strings.Join(e.Reasons, "; "))
}

// Unwrap matches ErrNoRoom or ErrNoMember and, when members offering the
// provider lacked a feature the request uses, subagent.ErrUnsupported.
func (e *placementError) Unwrap() []error {
	errs := []error{ErrNoMember}
	if e.noRoom {
		errs = []error{ErrNoRoom}
	}
	if e.unsupported != nil {
		errs = append(errs, e.unsupported)
	}
	if e.noSession {
		errs = append(errs, persistence.ErrNotFound)
	}
	return errs
}

// refusedError is a start the hosting node refused or failed.
type refusedError struct {
	Node, Code, Reason string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("remote: node %s refused the run (%s): %s", e.Node, e.Code, e.Reason)
}

// Unwrap matches ErrRefused and, for an invalid request or an unsupported
// feature, the Service's own sentinels.
func (e *refusedError) Unwrap() []error {
	switch e.Code {
	case clusterwire.RefusedInvalid:
		return []error{ErrRefused, subagent.ErrInvalidRequest}
	case clusterwire.FailedUnsupported:
		return []error{ErrRefused, subagent.ErrUnsupported}
	case clusterwire.FailedCancelled:
		return []error{ErrRefused, subagent.ErrCancelled}
	case clusterwire.FailedNoSession:
		return []error{ErrRefused, persistence.ErrNotFound}
	}
	return []error{ErrRefused}
}

// nodeLostError names the node whose loss settled a run.
type nodeLostError struct {
	Node, Address, Why string
}

func (e *nodeLostError) Error() string {
	return fmt.Sprintf("remote: hosting node %s (%s) lost: %s", e.Node, e.Address, e.Why)
}
func (e *nodeLostError) Unwrap() error { return ErrNodeLost }

// Config configures a remote provider.
type Config struct {
	// Name is the provider's name here and on the hosting nodes.
	Name string
	// Node is this process's cluster member.
	Node *cluster.Node
}

// provider places runs on peers. Safe for concurrent use.
type provider struct {
	cfg Config

	// known is each member's load as its last answer to a start said,
	// less the runs of ours it has quiesced since, until it gossips its
	// state again.
	mu    sync.Mutex
	known map[string]load

	client *client // of every run placed
}

// New returns the remote provider of cfg.Name.
func New(cfg Config) (subagent.Provider, error) {
	if cfg.Name == "" || cfg.Node == nil {
		return nil, errors.New("remote: a provider needs a name and a cluster node")
	}
	p := &provider{cfg: cfg, known: map[string]load{}}
	p.client = newClient(p)
	return p, nil
}

// Name implements subagent.Provider.
func (p *provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: the union of what the live
// members offering the provider advertise for it, so the Service takes a
// request one of them supports; placement then picks only such a member.
func (p *provider) Capabilities() subagent.Capabilities {
	var all subagent.Capabilities
	for _, m := range p.cfg.Node.Members() {
		if m.Offers(p.cfg.Name) {
			c := m.Capabilities[p.cfg.Name]
			all.OutputSchema = all.OutputSchema || c.OutputSchema
			all.DepthLimit = all.DepthLimit || c.DepthLimit
			all.ToolFilter = all.ToolFilter || c.ToolFilter
			all.Persona = all.Persona || c.Persona
		}
	}
	return all
}

// OutOfProcess makes its runs' spans CLIENT spans (otelx, O2): the child
// runs on another node.
func (p *provider) OutOfProcess() bool { return true }

// InheritsParentContext implements subagent.Provider: a remote child sees
// only its prompt.
func (p *provider) InheritsParentContext() bool { return false }

// load is what placement knows of a member's room: its gossiped state
// or, fresher, what its answers to this provider's starts said since that
// state (heard against gossipRuns and gossipCapacity, the state then).
type load struct {
	member                     cluster.Member
	capacity, runs             int64
	gossipCapacity, gossipRuns int64
}

func (l load) free() int64 { return l.capacity - l.runs }

// candidates returns the live members offering the provider, the most
// room first (ties by id), each with its load as gossiped or as heard
// since. A load may be stale; the host's own admission decides, and a
// full one refuses.
//
// A member whose advertisement lacks a feature req uses is no candidate
// (S4): the first such refusal is returned when it was one.
func (p *provider) candidates(req subagent.StartRequest) ([]load, error) {
	var cs []load
	var unsupported error
	p.mu.Lock()
	for _, m := range p.cfg.Node.Members() {
		if !m.Offers(p.cfg.Name) {
			continue
		}
		if err := rules.CheckCapabilities(p.cfg.Name, m.Capabilities[p.cfg.Name], req); err != nil {
			if unsupported == nil {
				unsupported = fmt.Errorf("member %s: %w", m.ID, err)
			}
			continue
		}
		l := load{member: m, capacity: m.Capacity, runs: m.Runs}
		if k, ok := p.known[m.ID]; ok && k.member.Address == m.Address && k.gossipCapacity == m.Capacity && k.gossipRuns == m.Runs {
			l.capacity, l.runs = k.capacity, k.runs
		} else {
			delete(p.known, m.ID) // the member's gossip is newer
		}
		cs = append(cs, l)
	}
	p.mu.Unlock()
	slices.SortStableFunc(cs, func(a, b load) int {
		return cmp.Or(cmp.Compare(b.free(), a.free()), strings.Compare(a.member.ID, b.member.ID))
	})
	return cs, unsupported
}

// heard records what m (as placement saw it) said of its load.
func (p *provider) heard(m cluster.Member, capacity, runs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.known[m.ID] = load{member: m, capacity: capacity, runs: runs, gossipCapacity: m.Capacity, gossipRuns: m.Runs}
}

// ended counts one of our runs on m as gone.
func (p *provider) ended(m cluster.Member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.known[m.ID]; ok && l.runs > 0 {
		l.runs--
		p.known[m.ID] = l
	}
}

// Start implements subagent.Provider: it places the run on the least
// loaded member offering the provider that has room, and returns once the
// hosting node's provider returned a live run. On an error nothing is
// left on any node (R6). A continuable child's first activation
// (scope.Continuable) is stored by the hosting provider before it starts,
// and, as every activation of such a child, runs under a run actor of
// this node whose supervisor may restart it elsewhere from the child's
// log when its node is lost (see relaunchable).
func (p *provider) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	return p.begin(ctx, scope, req, "")
}

// Resume implements subagent.Resumer: it continues the continuable child
// req.Continuation names, placed as Start places a run, on a member whose
// provider can read the child's log: with members sharing one store
// (PostgreSQL) any of them, so a child whose node died continues on
// another (K2); with a store per node only the node that wrote it. A
// member without the log refuses, and the next is tried; when none had
// it, the error matches persistence.ErrNotFound. Two activations never
// write one log: the resumed child takes it (agentlog.KindActivation), so
// an earlier activation still running on a node declared dead fails its
// next append and settles.
func (p *provider) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	if req.Continuation == nil || req.Continuation.SessionID == "" {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: "resume needs the child's session id"}
	}
	return p.begin(ctx, scope, req, req.Continuation.SessionID)
}

// begin places a start, or the resume of session when it is set.
func (p *provider) begin(ctx context.Context, scope subagent.Scope, req subagent.StartRequest, session string) (subagent.Run, error) {
	if req.Parent == nil {
		return nil, &subagent.InvalidRequestError{Field: "parent", Reason: "a delegating parent agent is required"}
	}
	if scope.RunID == "" {
		scope.RunID = ids.New() // a caller other than the Service
	}
	wire := p.startMessage(req, scope)
	wire.ContinueSession = session
	// The host's spans continue the caller's trace (O3).
	wire.Traceparent, _ = otelx.Inject(ctx)
	// A member may be reconnecting (its connection to a reused address
	// is replaced only once it notices the old one broke), so a start
	// may come back "gone" at once, and one may not have heard of this
	// node yet: placement is tried again, for up to placeRounds rounds
	// of at least placeRetry each, while nothing else stood in the way.
	// A continuable child's starts go to its grain, on the member the
	// cluster's identity lookup names its home (cluster.Node.Home).
	var home *actor.PID
	if scope.Continuable || session != "" {
		home, _ = p.cfg.Node.Home(ctx, p.cfg.Name, cmp.Or(session, scope.RunID))
	}
	for round := 1; ; round++ {
		began := time.Now()
		run, perr, err := p.place(ctx, req, wire, scope, home)
		switch {
		case err != nil:
			return nil, err
		case run != nil && (scope.Continuable || session != ""):
			return p.supervise(ctx, scope, req, run, cmp.Or(session, scope.RunID)), nil
		case run != nil:
			return run, nil
		}
		if !perr.notYet || round == placeRounds {
			return nil, perr
		}
		if wait := placeRetry - time.Since(began); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, subagent.Cancelled(context.Cause(ctx))
			}
		}
	}
}

// placeRetry is the shortest round of placement when another follows.
const placeRetry = 250 * time.Millisecond

// placeRounds bounds Start's rounds of placement when members were listed
// but none could take the start yet.
const placeRounds = 10

// place tries the candidates once, the member home is on first (when it
// is one with room), then the most room first: the run when one took it,
// a terminal error, or the placement error of this round.
func (p *provider) place(ctx context.Context, req subagent.StartRequest, wire *messages.RemoteStart, scope subagent.Scope, home *actor.PID) (subagent.Run, *placementError, error) {
	perr := &placementError{Provider: p.cfg.Name}
	candidates, unsupported := p.candidates(req)
	if len(candidates) == 0 {
		perr.unsupported = unsupported
		// A member that joined but was not heard from yet may offer it.
		perr.notYet = !p.cfg.Node.Heard()
	}
	if home != nil {
		if i := slices.IndexFunc(candidates, func(c load) bool { return c.member.Address == home.Address && c.free() > 0 }); i >= 0 {
			h := candidates[i]
			candidates = slices.Insert(slices.Delete(candidates, i, i+1), 0, h)
		} else {
			home = nil
		}
	}
	for _, c := range candidates {
		if ctx.Err() != nil {
			return nil, nil, subagent.Cancelled(context.Cause(ctx))
		}
		if c.free() <= 0 {
			perr.noRoom = true
			perr.Reasons = append(perr.Reasons, fmt.Sprintf("%s: full (%d of %d)", c.member.ID, c.runs, c.capacity))
			continue
		}
		var to *actor.PID
		if home != nil && c.member.Address == home.Address {
			to = home
		}
		run, err := p.startOn(ctx, c.member, wire, scope, to)
		var refused *refusedError
		switch {
		case err == nil:
			return run, nil, nil
		case errors.As(err, &refused) && refused.Code == clusterwire.RefusedNotMember:
			perr.notYet = true
			perr.Reasons = append(perr.Reasons, fmt.Sprintf("%s: %s", c.member.ID, refused.Reason))
		case errors.As(err, &refused) && refused.Code == clusterwire.FailedNoSession:
			perr.noSession = true
			perr.Reasons = append(perr.Reasons, fmt.Sprintf("%s: %s", c.member.ID, refused.Reason))
		case errors.As(err, &refused) && refused.Code == clusterwire.RefusedFull:
			p.heard(c.member, c.capacity, c.capacity)
			perr.noRoom = true
			perr.Reasons = append(perr.Reasons, fmt.Sprintf("%s: %s", c.member.ID, refused.Reason))
		case errors.Is(err, errLostBeforeAccepted):
			p.mu.Lock()
			delete(p.known, c.member.ID)
			p.mu.Unlock()
			perr.notYet = true
			perr.Reasons = append(perr.Reasons, fmt.Sprintf("%s: %v", c.member.ID, err))
		default:
			return nil, nil, err
		}
	}
	return nil, perr, nil
}

// startMessage is the wire form of a start request: what a local Start
// carries, the Go values (parent agent, event sink) replaced by the
// parent's session and depth, and this node's member id.
func (p *provider) startMessage(req subagent.StartRequest, scope subagent.Scope) *messages.RemoteStart {
	w := &messages.RemoteStart{
		RunId: scope.RunID, Provider: p.cfg.Name, CallerMember: p.cfg.Node.ID(),
		Prompt: wire.FromContent(req.Prompt),
		Options: &messages.AgentOptions{
			ModelProvider: req.Options.ModelProvider, Model: req.Options.Model,
			MaxTokens: int64(req.Options.MaxTokens), SubagentDepth: int64(req.Options.SubagentDepth),
		},
		OutputSchema:    req.OutputSchema,
		Persona:         req.Persona,
		Continuable:     scope.Continuable,
		ParentSessionId: scope.Parent.SessionID,
		ParentDepth:     int64(scope.Parent.Depth),
		// Progress nobody here listens to is not worth its messages.
		NoProgress: scope.Events == nil,
	}
	if w.ParentSessionId == "" {
		w.ParentSessionId = req.Parent.SessionID()
		w.ParentDepth = int64(req.Parent.Header().DelegationDepth)
	}
	if d := req.Options.MaxDepth; d != nil {
		w.Options.MaxDepth = new(int64(*d))
	}
	if d := req.MaxDepth; d != nil {
		w.MaxDepth = new(int64(*d))
	}
	if f := req.ToolFilter; f != nil {
		w.ToolFilter = &messages.ToolFilter{Allow: f.Allow, Deny: f.Deny}
	}
	return w
}

var errLostBeforeAccepted = errors.New("remote: the node was lost before it admitted the run")

// startOn starts the run on m through the client and waits for the
// hosting node's answer; when ctx ends first, the client disposes what the
// node admitted and Start returns after that (a start not admitted yet
// ends at once: the host abandons a late admission).
func (p *provider) startOn(ctx context.Context, m cluster.Member, wire *messages.RemoteStart, scope subagent.Scope, to *actor.PID) (subagent.Run, error) {
	r := &remoteRun{
		id: scope.RunID, node: m, events: scope.Events, client: p.client,
		settledCh: make(chan struct{}), quiesced: make(chan struct{}),
	}
	started := make(chan error, 1)
	p.client.send(placeRun{run: r, start: wire, to: to, started: started})
	select {
	case err := <-started:
		if err != nil {
			<-r.quiesced
			return nil, err
		}
	case <-ctx.Done():
		p.client.send(abandon{r.id})
		err := <-started
		<-r.quiesced
		if err == nil {
			err = subagent.Cancelled(context.Cause(ctx))
		}
		return nil, err
	}
	// ctx stays the run's cancellation channel (subagent.Provider).
	stop := context.AfterFunc(ctx, func() {
		p.client.send(cancelRun{run: r.id, reason: context.Cause(ctx).Error()})
	})
	r.OnSettled(func(subagent.Result, error) { stop() })
	if r.steerable {
		return &steerableRun{r}, nil
	}
	return r, nil
}
