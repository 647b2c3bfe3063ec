package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"go.opentelemetry.io/otel/trace"

	runactor "github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// leaveHosted asks the host actor to cancel and dispose every hosted run
// (a graceful leave); done is closed once they all stopped and their
// callers read what they sent.
type leaveHosted struct{ done chan struct{} }

// host is the node's host actor: it admits starts from peers within the
// node's capacity, starts each admitted run as a run actor commanded by
// its caller (run.Hosted), and watches the callers: a caller that is gone
// has its runs disposed (K2), since nobody else will.
type host struct {
	n       *Node
	runs    map[string]*hostedRun // by run id, until its actor stopped or its start failed
	actors  map[string]string     // run actor's PID id -> run id
	callers map[pidKey]*caller    // while it is watched
	// leaving is closed once the last run stopped and its callers read
	// what it sent them, during a leave; left once that wait began.
	leaving  chan struct{}
	left     bool
	topology *eventstream.Subscription
}

// hostedRun is one admitted run.
type hostedRun struct {
	id     string
	caller *caller
	cancel context.CancelCauseFunc // ends the run's context
	run    subagent.Run            // nil while its start is under way
	// dropped: the caller gave it up, is gone, or the node leaves: a run
	// still starting is disposed once started.
	dropped bool
}

// caller is a peer actor that started runs here.
type caller struct {
	pid *actor.PID
	// member is the caller's member id: its runs live while that member
	// does (a lost connection alone may be a stale incarnation of its
	// address), and no longer.
	member string
}

// pidKey identifies a PID as a map key: PID.String() is protobuf's text
// format, some 15 µs a start on this path.
type pidKey struct{ address, id string }

func keyOf(p *actor.PID) pidKey { return pidKey{p.Address, p.Id} }

// Local messages of the host actor, from goroutines it owns.
type (
	startDone struct {
		id  string
		run subagent.Run
		pid *actor.PID
		err error
	}
	topologyChanged struct{}
)

func newHost(n *Node) *host {
	return &host{n: n, runs: map[string]*hostedRun{}, actors: map[string]string{}, callers: map[pidKey]*caller{}}
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
	case *actor.Started:
		self, sys := ctx.Self(), ctx.ActorSystem()
		h.topology = sys.EventStream.Subscribe(func(ev any) {
			if _, ok := ev.(*cluster.ClusterTopology); ok {
				sys.Root.Send(self, topologyChanged{})
			}
		})
	case *actor.Stopped:
		ctx.ActorSystem().EventStream.Unsubscribe(h.topology)
	case *messages.HostStatus:
		ctx.Respond(h.load())
	case *messages.RemoteStart:
		h.start(ctx, m)
	case *messages.RemoteAbandon:
		if r := h.runs[m.GetRunId()]; r != nil && r.run == nil && ctx.Sender() != nil && ctx.Sender().Equal(r.caller.pid) {
			h.drop(r, errors.New("the caller abandoned the start"))
		}
	case startDone:
		h.started(ctx, m)
	case *actor.Terminated:
		h.terminated(ctx, m)
	case topologyChanged:
		for _, c := range h.callers {
			if !h.n.isMember(c.member) {
				h.callerGone(ctx, c, "its member left the cluster")
			}
		}
	case leaveHosted:
		h.leaving = m.done
		for _, r := range h.runs {
			h.drop(r, fmt.Errorf("node %s is leaving the cluster", h.n.ID()))
		}
		h.leave(ctx)
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
	ids := slices.Sorted(maps.Keys(h.runs))
	return &messages.HostLoad{
		Node: h.n.ID(), Providers: h.n.providerNames(),
		Capacity: int64(h.n.cfg.Capacity), Runs: int64(len(ids)), RunIds: ids,
		State: h.n.ownState(len(ids)),
	}
}

func (h *host) start(ctx actor.Context, m *messages.RemoteStart) {
	// Answers carry the host as their sender: the caller takes them
	// from its run's node only.
	refuse := func(code, reason string) {
		ctx.Request(ctx.Sender(), &messages.RemoteRefused{RunId: m.GetRunId(), Code: code, Reason: reason})
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
	if _, resumes := p.(subagent.Resumer); p != nil && err == nil && unsupported == nil && req.Continuation != nil && !resumes {
		unsupported = fmt.Errorf("%w: %q", subagent.ErrNotResumable, p.Name())
	}
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
	case len(h.runs) >= h.n.cfg.Capacity:
		refuse(clusterwire.RefusedFull, fmt.Sprintf("node %s hosts %d runs, its capacity", h.n.ID(), len(h.runs)))
	default:
		c := h.callerOf(ctx, ctx.Sender(), m.GetCallerMember())
		// The run's spans continue the caller's trace (O3).
		runCtx, cancel := context.WithCancelCause(otelx.Extract(context.Background(), m.GetTraceparent(), ""))
		r := &hostedRun{id: m.GetRunId(), caller: c, cancel: cancel}
		h.runs[r.id] = r
		h.n.load.changed(len(h.runs))
		accepted := &messages.RemoteAccepted{RunId: r.id, Node: h.n.ID(), Capacity: int64(h.n.cfg.Capacity), Runs: int64(len(h.runs))}
		// The host stands in for the Service: the provider gets the
		// run's scope, its progress going straight to the caller, which
		// takes it from this node's address only (none when the caller
		// has no listener for it).
		scope := subagent.Scope{RunID: r.id, Parent: subagent.ParentRef{SessionID: m.GetParentSessionId(), Depth: int(m.GetParentDepth())}, Continuable: m.GetContinuable()}
		self, sys := ctx.Self(), ctx.ActorSystem()
		if !m.GetNoProgress() {
			scope.Events = sink{sys: sys, to: c.pid, from: self}
		}
		// A start that takes a while is told accepted, so its caller
		// neither gives it up at its deadline nor waits blind; a quick
		// one is answered once, started, in one message.
		var told atomic.Bool
		slow := time.AfterFunc(acceptAfter, func() {
			if told.CompareAndSwap(false, true) {
				sys.Root.RequestWithCustomSender(c.pid, accepted, self)
			}
		})
		var span trace.Span
		if otelx.On() {
			runCtx, span = otelx.StartRun(runCtx, otelx.Run{Provider: p.Name(), Server: true})
		}
		go func() {
			run, pid, err := runactor.Hosted(runCtx, sys, p, scope, req, c.pid)
			if span != nil {
				e := otelx.Ended{RunID: r.id, ParentSession: scope.Parent.SessionID, Depth: scope.Parent.Depth + 1}
				if err != nil {
					otelx.EndFailed(span, e, err)
				} else {
					e.SessionID = run.SessionID()
					run.OnSettled(func(res subagent.Result, err error) { otelx.EndRun(span, e, res, err) })
				}
			}
			slow.Stop()
			told.Store(true)
			// Told from here, not through the host's mailbox: one hop
			// less on every remote start.
			tellStarted(sys, c.pid, accepted, run, pid, err)
			sys.Root.Send(self, startDone{r.id, run, pid, err})
		}()
	}
}

// acceptAfter is how long a start runs before its caller is told that it
// was admitted: longer than a quick start, far shorter than the caller's
// deadline for an answer (the node's loss bound, seconds).
const acceptAfter = 100 * time.Millisecond

// hostThroughput is how many messages the host handles on a delivering
// goroutine before it yields, as protoactor's own dispatchers do.
const hostThroughput = 300

// callerOf is the caller that sent a start, watched from its first.
func (h *host) callerOf(ctx actor.Context, pid *actor.PID, member string) *caller {
	key := keyOf(pid)
	c := h.callers[key]
	if c == nil {
		c = &caller{pid: pid, member: member}
		h.callers[key] = c
		ctx.Watch(pid)
	}
	return c
}

// tellStarted tells the caller how a start went: it failed and rolled
// back, or the run is the caller's from now on: it counts the caller as
// its watcher and is disposed as it settles.
func tellStarted(sys *actor.ActorSystem, caller *actor.PID, accepted *messages.RemoteAccepted, run subagent.Run, pid *actor.PID, err error) {
	id := accepted.RunId
	if err != nil {
		code := ""
		switch {
		case errors.Is(err, persistence.ErrNotFound):
			code = clusterwire.FailedNoSession
		case errors.Is(err, subagent.ErrUnsupported):
			code = clusterwire.FailedUnsupported
		case errors.Is(err, subagent.ErrInvalidRequest):
			code = clusterwire.RefusedInvalid
		case errors.Is(err, subagent.ErrCancelled), errors.Is(err, context.Canceled):
			code = clusterwire.FailedCancelled
		}
		sys.Root.RequestWithCustomSender(caller, &messages.RemoteStartFailed{RunId: id, Code: code, Reason: err.Error()}, clusterwire.Host(sys.Address()))
		return
	}
	_, steerable := run.(subagent.Steerer)
	sys.Root.RequestWithCustomSender(caller, &messages.RemoteStarted{RunId: id, Steerable: steerable, Capacity: accepted.Capacity, Runs: accepted.Runs}, pid)
	sys.Root.RequestWithCustomSender(pid, &messages.Watch{}, caller)
	// Settled is final: the run is disposed at once, so that the
	// caller's Dispose finds it quiesced (or nearly) instead of paying
	// another round trip, and the agent's resources go early. The
	// caller counts on it: it sends no Dispose to a settled run.
	run.OnSettled(func(subagent.Result, error) { sys.Root.RequestWithCustomSender(pid, &messages.Dispose{}, caller) })
}

// started keeps a start's outcome: a failed start is no longer hosted; a
// live run is watched until its actor stops, and disposed at once if it
// was dropped meanwhile.
func (h *host) started(ctx actor.Context, m startDone) {
	r := h.runs[m.id]
	if m.err != nil {
		r.cancel(m.err)
		delete(h.runs, m.id)
		h.n.load.changed(len(h.runs))
		h.leave(ctx)
		return
	}
	r.run = m.run
	h.actors[m.pid.Id] = m.id
	ctx.Watch(m.pid)
	if r.dropped {
		go dispose(m.run)
	}
}

// terminated is a run actor that stopped, or a caller that is gone.
func (h *host) terminated(ctx actor.Context, m *actor.Terminated) {
	if id, ok := h.actors[m.Who.Id]; ok && m.Who.Address == ctx.Self().Address {
		delete(h.actors, m.Who.Id)
		if r := h.runs[id]; r != nil {
			r.cancel(errors.New("quiesced"))
			delete(h.runs, id)
			h.n.load.changed(len(h.runs))
		}
		h.leave(ctx)
		return
	}
	c := h.callers[keyOf(m.Who)]
	if c == nil {
		return
	}
	if h.n.isMember(c.member) && m.Why == actor.TerminatedReason_AddressTerminated {
		// The connection went, the member did not (yet): a stale
		// termination of its address, or a death membership will
		// confirm. Watch again; topologyChanged decides.
		ctx.Watch(c.pid)
		return
	}
	h.callerGone(ctx, c, m.Why.String())
}

// callerGone disposes the runs of a caller that died or left: nobody
// else will, and no agent may be orphaned (K2).
func (h *host) callerGone(ctx actor.Context, c *caller, why string) {
	delete(h.callers, keyOf(c.pid))
	ctx.Unwatch(c.pid)
	for _, r := range h.runs {
		if r.caller == c {
			h.n.logger().Warn("cluster: the caller of a hosted run is gone; disposing it", "run", r.id, "caller", c.pid.Address, "why", why)
			h.drop(r, errors.New("the caller's node is gone"))
		}
	}
}

// drop cancels a run with cause and disposes it; one still starting is
// disposed once started (or rolls itself back).
func (h *host) drop(r *hostedRun, cause error) {
	if r.dropped {
		return
	}
	r.dropped = true
	r.cancel(cause)
	if r.run != nil {
		go dispose(r.run)
	}
}

// dispose disposes a hosted run on a goroutine of its own: Dispose
// waits for the run to quiesce (its agent process reaped).
func dispose(r subagent.Run) {
	_ = r.Dispose(context.Background())
}

// leave ends a leave once the last run stopped: it waits (on a goroutine
// of its own, within the node's loss bound) for the callers to have read
// what their runs sent, since the node stops once done is closed.
func (h *host) leave(ctx actor.Context) {
	if h.leaving == nil || h.left || len(h.runs) > 0 {
		return
	}
	h.left = true
	done, sys := h.leaving, ctx.ActorSystem()
	callers := slices.Collect(maps.Values(h.callers))
	bound := h.n.LossBound()
	go func() {
		var wg sync.WaitGroup
		for _, c := range callers {
			// A Touch is answered after everything sent before it.
			wg.Go(func() { _, _ = sys.Root.RequestFuture(c.pid, &actor.Touch{}, bound).Result() })
		}
		wg.Wait()
		close(done)
	}()
}

// sink sends a hosted run's progress to its caller, from the host's
// address: it is sent before the run's result, which the run actor sends
// once the child that emitted it returned, so it arrives first.
type sink struct {
	sys      *actor.ActorSystem
	to, from *actor.PID
}

func (s sink) Emit(ev subagent.RunProgress) {
	if w, err := wire.FromEvent(ev); err == nil {
		s.sys.Root.RequestWithCustomSender(s.to, w, s.from)
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
	if len(m.GetPrompt()) == 0 && m.GetContinueSession() == "" {
		// A resume may continue from the log alone (a relaunch).
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
	if len(m.GetContinueSession()) > 128 {
		return invalid("continue session", "longer than 128 bytes")
	}
	if m.GetContinuable() && m.GetContinueSession() != "" {
		return invalid("continue session", "a continuable child's first activation resumes nothing")
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
	if id := m.GetContinueSession(); id != "" {
		req.Continuation = &subagent.Continuation{SessionID: id}
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
