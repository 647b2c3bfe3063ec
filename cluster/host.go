package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// leaveHosted asks the host actor to cancel and dispose every hosted run
// (a graceful leave); done is closed once they all stopped.
type leaveHosted struct{ done chan struct{} }

// host is the node's host actor: it admits starts from peers within the
// node's capacity and supervises one hosted actor per admitted run.
type host struct {
	n    *Node
	runs map[string]*actor.PID // run id -> hosted actor, until it stops
	// quiesced holds the runs whose child quiesced but whose caller has
	// not yet acknowledged it: still hosted, no longer load.
	quiesced map[string]bool
	leaving  chan struct{} // closed when the last run stopped, during a leave
}

// hostedQuiesced tells the host that a run's child quiesced. The hosted
// actor sends it before it tells the caller, so a status asked after the
// caller's Dispose returned no longer counts the run.
type hostedQuiesced struct{ runID string }

func newHost(n *Node) *host {
	return &host{n: n, runs: map[string]*actor.PID{}, quiesced: map[string]bool{}}
}

func (h *host) Receive(ctx actor.Context) {
	// A bug met by a peer's message must not reset the host (protoactor
	// restarts a panicking actor with fresh state, forgetting its runs):
	// the message is refused and the host goes on (K3).
	defer func() {
		if r := recover(); r != nil {
			h.n.logger().Error("cluster: host failed on a message", "message", fmt.Sprintf("%T", ctx.Message()), "panic", fmt.Sprint(r))
			if ctx.Sender() != nil {
				ctx.Respond(&messages.RemoteRefused{Code: clusterwire.RefusedInvalid, Reason: "the host failed on the request"})
			}
		}
	}()
	switch m := ctx.Message().(type) {
	case *messages.HostStatus:
		ctx.Respond(h.load())
	case *messages.RemoteStart:
		h.start(ctx, m)
	case hostedQuiesced:
		if _, ok := h.runs[m.runID]; ok {
			h.quiesced[m.runID] = true
		}
	case *actor.Terminated:
		for id, pid := range h.runs {
			if pid.Equal(m.Who) {
				delete(h.runs, id)
				delete(h.quiesced, id)
			}
		}
		if h.leaving != nil && len(h.runs) == 0 {
			close(h.leaving)
			h.leaving = nil
		}
	case leaveHosted:
		if len(h.runs) == 0 {
			close(m.done)
			return
		}
		h.leaving = m.done
		for _, pid := range h.runs {
			ctx.Send(pid, leaveHosted{})
		}
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		// A peer's message of a type the host does not take: answered,
		// never a crash (K3).
		if ctx.Sender() != nil {
			ctx.Respond(&messages.RemoteRefused{Code: clusterwire.RefusedUnknownKind, Reason: fmt.Sprintf("the host takes no %T", m)})
		}
	}
}

func (h *host) load() *messages.HostLoad {
	ids := make([]string, 0, len(h.runs))
	for id := range h.runs {
		if !h.quiesced[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return &messages.HostLoad{
		Node: h.n.ID(), Providers: h.n.providerNames(),
		Capacity: int64(h.n.cfg.Capacity), Runs: int64(len(ids)), RunIds: ids,
	}
}

// busy is the number of runs that count against the capacity.
func (h *host) busy() int { return len(h.runs) - len(h.quiesced) }

func (h *host) start(ctx actor.Context, m *messages.RemoteStart) {
	refuse := func(code, reason string) {
		ctx.Respond(&messages.RemoteRefused{RunId: m.GetRunId(), Code: code, Reason: reason})
	}
	if ctx.Sender() == nil {
		return // nobody to answer or to report to
	}
	p := h.n.provider(m.GetProvider())
	req, err := validateStart(m, h.n.cfg.MaxPrompt)
	var unsupported error
	if p != nil && err == nil {
		// A feature its provider lacks is refused, never dropped (S4):
		// a caller skipping the Service's check gets the same answer.
		unsupported = rules.CheckCapabilities(p.Name(), p.Capabilities(), req)
	}
	_, dup := h.runs[m.GetRunId()]
	switch {
	case h.leaving != nil:
		refuse(clusterwire.RefusedFull, "the node is leaving the cluster")
	case p == nil:
		refuse(clusterwire.RefusedNoProvider, fmt.Sprintf("node %s offers no provider %q", h.n.ID(), m.GetProvider()))
	case err != nil:
		refuse(clusterwire.RefusedInvalid, err.Error())
	case unsupported != nil:
		refuse(clusterwire.FailedUnsupported, unsupported.Error())
	case dup:
		refuse(clusterwire.RefusedDuplicate, fmt.Sprintf("run %s is already hosted here", m.GetRunId()))
	case !h.n.isMember(m.GetCallerMember()):
		// Admitted only once membership names the caller: protoactor
		// then has dropped its connection to any earlier member on the
		// caller's address, so the answers reach this caller (K2).
		refuse(clusterwire.RefusedNotMember, fmt.Sprintf("caller %q is not a member of node %s's cluster (yet)", m.GetCallerMember(), h.n.ID()))
	case h.busy() >= h.n.cfg.Capacity:
		refuse(clusterwire.RefusedFull, fmt.Sprintf("node %s hosts %d runs, its capacity", h.n.ID(), h.busy()))
	default:
		accepted := &messages.RemoteAccepted{RunId: m.GetRunId(), Node: h.n.ID(), Capacity: int64(h.n.cfg.Capacity), Runs: int64(h.busy() + 1)}
		h.runs[m.GetRunId()] = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			scope := subagent.Scope{RunID: m.GetRunId(), Parent: subagent.ParentRef{SessionID: m.GetParentSessionId(), Depth: int(m.GetParentDepth())}}
			return &hosted{n: h.n, p: p, req: req, scope: scope, caller: ctx.Sender(), callerMember: m.GetCallerMember(), accepted: accepted, steers: map[uint64]context.CancelFunc{}}
		}))
	}
}

// validateStart checks a peer's start request the way the Service checks
// a local one, before any provider code runs (K3), and converts it. A
// request the node cannot take is an *subagent.InvalidRequestError.
func validateStart(m *messages.RemoteStart, maxPrompt int) (subagent.StartRequest, error) {
	invalid := func(field, reason string) (subagent.StartRequest, error) {
		return subagent.StartRequest{}, &subagent.InvalidRequestError{Field: field, Reason: reason}
	}
	if m.GetRunId() == "" {
		return invalid("run id", "empty")
	}
	if len(m.GetRunId()) > 128 {
		return invalid("run id", "longer than 128 bytes")
	}
	size := 0
	for _, b := range m.GetPrompt() {
		size += len(b.GetText())
	}
	if size > maxPrompt {
		return invalid("prompt", fmt.Sprintf("%d bytes, over the node's limit of %d", size, maxPrompt))
	}
	if len(m.GetPrompt()) == 0 {
		return invalid("prompt", "empty")
	}
	if m.GetParentDepth() < 0 || m.GetOptions().GetSubagentDepth() < 0 {
		return invalid("depth", "negative")
	}
	if m.MaxDepth != nil && m.GetMaxDepth() < 0 {
		return invalid("max depth", "negative")
	}
	if len(m.GetOutputSchema()) > maxPrompt {
		return invalid("output schema", "over the node's size limit")
	}
	req := subagent.StartRequest{
		Prompt: wire.ToContent(m.GetPrompt()),
		Parent: remoteParent{session: m.GetParentSessionId(), depth: int(m.GetParentDepth())},
		Options: subagent.AgentOptions{
			ModelProvider: m.GetOptions().GetModelProvider(), Model: m.GetOptions().GetModel(),
			MaxTokens: int(m.GetOptions().GetMaxTokens()), SubagentDepth: int(m.GetOptions().GetSubagentDepth()),
		},
		OutputSchema: m.GetOutputSchema(),
		Persona:      m.Persona,
	}
	if len(req.OutputSchema) == 0 {
		req.OutputSchema = nil
	}
	if o := m.GetOptions(); o != nil && o.MaxDepth != nil {
		req.Options.MaxDepth = new(int(o.GetMaxDepth()))
	}
	if m.MaxDepth != nil {
		req.MaxDepth = new(int(m.GetMaxDepth()))
	}
	if f := m.GetToolFilter(); f != nil {
		req.ToolFilter = &subagent.ToolFilter{Allow: f.GetAllow(), Deny: f.GetDeny()}
	}
	return req, nil
}

// remoteParent is the delegating parent on the caller's node, as far as
// the hosting node knows it: its session and depth.
type remoteParent struct {
	session string
	depth   int
}

func (p remoteParent) ID() string        { return p.session }
func (p remoteParent) SessionID() string { return p.session }
func (p remoteParent) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: p.session, DelegationDepth: p.depth}
}
func (p remoteParent) Options() subagent.AgentOptions {
	return subagent.AgentOptions{SubagentDepth: p.depth}
}

// hosted is one run hosted for a peer's proxy (the caller). Only the
// caller may steer, cancel or dispose it; it watches the caller and
// disposes its run when the caller is gone (K2).
type hosted struct {
	n        *Node
	p        subagent.Provider
	req      subagent.StartRequest
	scope    subagent.Scope
	caller   *actor.PID
	accepted *messages.RemoteAccepted
	// callerMember is the caller's member id, when it gave one: the run
	// lives while that member does (a lost connection alone may be a
	// stale incarnation of its address), and no longer.
	callerMember string
	topology     *eventstream.Subscription

	cancel    context.CancelCauseFunc
	run       subagent.Run
	disposing bool
	reported  bool // RunSettled went to the caller
	done      bool // RunQuiesced went to the caller: it releases the actor
	steers    map[uint64]context.CancelFunc
}

// Local messages of a hosted actor, from goroutines it owns.
type (
	startDone struct {
		run subagent.Run
		err error
	}
	settled struct {
		res subagent.Result
		err error
	}
	disposed  settled // the run's result, read once Dispose returned
	steerDone struct {
		id  uint64
		err error
	}
	progress        struct{ ev subagent.RunProgress }
	topologyChanged struct{}
)

// sink forwards a run's progress through the hosted actor's mailbox, so
// it reaches the caller in order and before the run's result.
type sink struct {
	sys  *actor.ActorSystem
	self *actor.PID
}

func (s sink) Emit(ev subagent.RunProgress) { s.sys.Root.Send(s.self, progress{ev}) }

func (r *hosted) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		self, sys := ctx.Self(), ctx.ActorSystem()
		if r.callerMember != "" {
			r.topology = sys.EventStream.Subscribe(func(ev any) {
				if _, ok := ev.(*cluster.ClusterTopology); ok {
					sys.Root.Send(self, topologyChanged{})
				}
			})
		}
		ctx.Watch(r.caller)
		ctx.Request(r.caller, r.accepted)
		runCtx, cancel := context.WithCancelCause(context.Background())
		r.cancel = cancel
		// The host stands in for the Service: the provider gets the
		// run's scope, events going to this actor.
		scope := r.scope
		scope.Events = sink{sys, self}
		p, req := r.p, r.req
		go func() {
			run, err := p.Start(runCtx, scope, req)
			sys.Root.Send(self, startDone{run, err})
		}()
	case startDone:
		if m.err != nil {
			code := ""
			switch {
			case errors.Is(m.err, subagent.ErrUnsupported):
				code = clusterwire.FailedUnsupported
			case errors.Is(m.err, subagent.ErrInvalidRequest):
				code = clusterwire.RefusedInvalid
			case errors.Is(m.err, subagent.ErrCancelled), errors.Is(m.err, context.Canceled):
				code = clusterwire.FailedCancelled
			}
			ctx.Send(r.caller, &messages.RemoteStartFailed{RunId: r.scope.RunID, Code: code, Reason: m.err.Error()})
			r.quiesced(ctx)
			return
		}
		r.run = m.run
		_, steerable := m.run.(subagent.Steerer)
		ctx.Send(r.caller, &messages.RemoteStarted{RunId: r.scope.RunID, Steerable: steerable})
		self, sys := ctx.Self(), ctx.ActorSystem()
		m.run.OnSettled(func(res subagent.Result, err error) { sys.Root.Send(self, settled{res, err}) })
		if r.disposing {
			r.dispose(ctx)
		}
	case progress:
		if w, err := wire.FromEvent(m.ev); err == nil {
			ctx.Send(r.caller, w)
		}
	case settled:
		// Settled is final: the run is disposed at once, so that the
		// caller's Dispose finds it quiesced (or nearly) instead of
		// paying another round trip, and the agent's resources go early.
		r.report(ctx, m)
		r.dispose(ctx)
	case *messages.Steer:
		if !r.fromCaller(ctx) {
			return
		}
		st, ok := r.run.(subagent.Steerer)
		if !ok || r.disposing {
			ctx.Send(r.caller, &messages.SteerAnswer{SteerId: m.GetSteerId(), Reason: "the run takes no steer now"})
			return
		}
		sctx, cancel := context.WithCancel(context.Background())
		r.steers[m.GetSteerId()] = cancel
		self, sys, id, content := ctx.Self(), ctx.ActorSystem(), m.GetSteerId(), wire.ToContent(m.GetContent())
		go func() { sys.Root.Send(self, steerDone{id, st.Steer(sctx, content)}) }()
	case steerDone:
		if cancel, ok := r.steers[m.id]; ok {
			cancel()
			delete(r.steers, m.id)
		}
		a := &messages.SteerAnswer{SteerId: m.id, Admitted: m.err == nil}
		if m.err != nil {
			a.Reason = m.err.Error()
		}
		ctx.Send(r.caller, a)
	case *messages.SteerWithdraw:
		if r.fromCaller(ctx) {
			if cancel, ok := r.steers[m.GetSteerId()]; ok {
				cancel()
			}
		}
	case *messages.Cancel:
		if r.fromCaller(ctx) {
			r.cancel(fmt.Errorf("cancelled by the caller: %s", m.GetReason()))
		}
	case *messages.Dispose:
		switch {
		case !r.fromCaller(ctx):
		case r.done:
			ctx.Stop(ctx.Self()) // the caller's release after RunQuiesced
		default:
			r.dispose(ctx)
		}
	case leaveHosted:
		r.cancel(fmt.Errorf("node %s is leaving the cluster", r.n.ID()))
		r.dispose(ctx)
	case *actor.Terminated:
		if r.caller == nil || !m.Who.Equal(r.caller) {
			return
		}
		if r.callerMember != "" && r.n.isMember(r.callerMember) && m.Why == actor.TerminatedReason_AddressTerminated {
			// The connection went, the member did not (yet): a stale
			// termination of its address, or a death membership will
			// confirm. Watch again; topologyChanged decides.
			ctx.Watch(r.caller)
			return
		}
		r.callerGone(ctx, m.Why.String())
	case topologyChanged:
		if r.caller != nil && !r.n.isMember(r.callerMember) {
			r.callerGone(ctx, "its member left the cluster")
		}
	case disposed:
		r.report(ctx, settled(m))
		r.quiesced(ctx)
	case *actor.Stopped:
		if r.topology != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(r.topology)
		}
	}
}

// report sends the run's result to the caller, once.
func (r *hosted) report(ctx actor.Context, s settled) {
	if r.reported || r.caller == nil {
		return
	}
	r.reported = true
	msg := &messages.RunSettled{RunId: r.scope.RunID, Result: wire.FromResult(s.res)}
	if s.err != nil {
		msg.Error = s.err.Error()
	}
	ctx.Send(r.caller, msg)
}

// callerGone disposes the run of a caller that died or left: nobody
// else will, and no agent may be orphaned (K2).
func (r *hosted) callerGone(ctx actor.Context, why string) {
	if r.done {
		ctx.Stop(ctx.Self()) // gone before it released this actor
		return
	}
	r.n.logger().Warn("cluster: the caller of a hosted run is gone; disposing it",
		"run", r.scope.RunID, "caller", r.caller.Address, "why", why)
	r.caller = nil
	r.cancel(errors.New("the caller's node is gone"))
	r.dispose(ctx)
}

// fromCaller refuses a command about this run from anyone but its caller
// (K3): a foreign sender gets a typed refusal.
func (r *hosted) fromCaller(ctx actor.Context) bool {
	if r.caller != nil && ctx.Sender() != nil && ctx.Sender().Equal(r.caller) {
		return true
	}
	if ctx.Sender() != nil {
		ctx.Respond(&messages.RemoteRefused{RunId: r.scope.RunID, Code: clusterwire.RefusedForeignRun, Reason: "the run belongs to another caller"})
	}
	return false
}

// dispose disposes the run once its Start returned; a start still in
// progress is cancelled and rolls itself back.
func (r *hosted) dispose(ctx actor.Context) {
	r.disposing = true
	r.cancel(errors.New("disposed"))
	if r.run == nil {
		return // startDone follows, or the dispose is under way
	}
	run, self, sys := r.run, ctx.Self(), ctx.ActorSystem()
	r.run = nil
	go func() {
		if err := run.Dispose(context.Background()); err != nil {
			r.n.logger().Warn("cluster: disposing a hosted run", "run", r.scope.RunID, "err", err)
		}
		// Settled by now: the result goes out before RunQuiesced even
		// when the run's own observer is still on its way.
		res, err := run.Wait(context.Background())
		sys.Root.Send(self, disposed{res, err})
	}()
}

// quiesced reports the run's end to the caller, which releases the actor
// with a Dispose once it has read everything before (so that its watch
// never sees this actor stop first); without a caller it stops at once.
func (r *hosted) quiesced(ctx actor.Context) {
	for _, cancel := range r.steers {
		cancel()
	}
	r.cancel(errors.New("quiesced"))
	r.done = true
	ctx.Send(ctx.Parent(), hostedQuiesced{runID: r.scope.RunID})
	if r.caller == nil {
		ctx.Stop(ctx.Self())
		return
	}
	ctx.Send(r.caller, &messages.RunQuiesced{RunId: r.scope.RunID})
}
