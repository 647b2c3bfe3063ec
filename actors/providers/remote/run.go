package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// remoteRun is a run hosted on another node: the run actor on its host,
// commanded through this provider's client actor (R1: the Service's run
// id, no local agent, no local session).
type remoteRun struct {
	id     string
	node   cluster.Member
	events subagent.EventSink
	client *client
	// steerable is set by the client before Start returns.
	steerable bool

	mu        sync.Mutex
	settled   bool
	settledCh chan struct{} // closed after the observers ran
	res       subagent.Result
	err       error
	observers []func(subagent.Result, error)

	quiesced chan struct{} // closed once the hosting node reported the child quiesced, or was lost
}

var _ subagent.Run = (*remoteRun)(nil)

// ID implements subagent.Run: the Service's run id.
func (r *remoteRun) ID() string { return r.id }

// SessionID implements subagent.Run: a remote run has no session here.
func (r *remoteRun) SessionID() string { return "" }

// LocalAgent implements subagent.Run: nil, the child lives elsewhere.
func (r *remoteRun) LocalAgent() subagent.Agent { return nil }

// Wait implements subagent.Run. Once ctx has ended it returns ctx's
// error, settled or not (a select on both would pick either at random).
func (r *remoteRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.settledCh:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return subagent.Result{}, subagent.Cancelled(context.Cause(ctx))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res, r.err
}

// OnSettled implements subagent.Run: f runs at once if the run has
// settled, else when it settles, before Wait returns (so what f sends is
// sent before any waiter goes on). f must not block.
func (r *remoteRun) OnSettled(f func(subagent.Result, error)) {
	r.mu.Lock()
	if r.settled {
		res, err := r.res, r.err
		r.mu.Unlock()
		f(res, err)
		return
	}
	r.observers = append(r.observers, f)
	r.mu.Unlock()
}

func (r *remoteRun) isSettled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settled
}

// settle records the result once; later calls are ignored.
func (r *remoteRun) settle(res subagent.Result, err error) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return
	}
	r.settled, r.res, r.err = true, res, err
	obs := r.observers
	r.observers = nil
	r.mu.Unlock()
	for _, f := range obs {
		f(res, err)
	}
	close(r.settledCh)
}

// Dispose implements subagent.Run: it cancels the remote child and
// returns once the hosting node reported it quiesced (its agent process
// reaped), or once that node is lost. Idempotent, safe concurrently.
func (r *remoteRun) Dispose(ctx context.Context) error {
	select {
	case <-r.quiesced:
		return nil
	default:
	}
	r.client.send(disposeRun{r.id})
	select {
	case <-r.quiesced:
		return nil
	case <-ctx.Done():
		return subagent.Cancelled(context.Cause(ctx))
	}
}

// steerableRun is a remote run whose hosted child accepts steering.
type steerableRun struct{ *remoteRun }

var _ subagent.Steerer = steerableRun{}

// Steer implements subagent.Steerer (R4): it returns once the hosted
// child admitted the message into its next model request, or fails with
// subagent.ErrNotDelivered. When ctx ends first the steer is withdrawn
// and Steer waits for the run's final answer, so a message is never left
// queued unknown to the caller.
func (r steerableRun) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	answer := make(chan error, 1)
	r.client.send(steerRun{run: r.id, content: message, answer: answer, ctx: ctx})
	select {
	case err := <-answer:
		return err
	case <-r.quiesced:
		// An answer that came before the run ended is the steer's: a
		// select on both would pick either at random.
		select {
		case err := <-answer:
			return err
		default:
			return errRunEnded
		}
	}
}

var errRunEnded = fmt.Errorf("%w: the run ended", subagent.ErrNotDelivered)

// Local commands to the client, from the Run handles and Start.
type (
	placeRun struct {
		run     *remoteRun
		start   *messages.RemoteStart
		to      *actor.PID // the child's grain on its home member; nil: the member's host
		started chan error // answered once
	}
	abandon    struct{ run string } // the caller's Start gave up: dispose whatever started
	unanswered struct{ run string } // the host did not admit nor refuse the start within its loss bound
	cancelRun  struct{ run, reason string }
	disposeRun struct{ run string }
	steerRun   struct {
		run     string
		ctx     context.Context
		content []subagent.ContentBlock
		answer  chan error
	}
	withdrawSteer struct{ id uint64 }
)

// client is the caller's side of every run this provider placed: one
// actor that sends each start to a host and then commands the run actor
// on that host by its PID. It watches each host it placed a run on once,
// not each run: losing the host settles that host's runs.
type client struct {
	p    *provider
	sys  *actor.ActorSystem
	self *actor.PID

	runs      map[string]*placed // by run id, until quiesced or lost
	hosts     map[string]bool    // addresses whose host actor is watched
	steers    map[uint64]*pendingSteer
	nextSteer uint64
}

// placed is the client's state of one run.
type placed struct {
	run       *remoteRun
	started   chan error  // written once, then nil
	deadline  *time.Timer // of the admission
	accepted  bool        // the host said it admitted the run
	announced bool        // the HostedBy event went out
	pid       *actor.PID  // the run actor, once started
	// disposing: disposed, or its start abandoned once admitted; a run
	// starting is disposed once started.
	disposing bool
}

// pendingSteer is a steer sent to a run actor, until answered.
type pendingSteer struct {
	run    string
	answer chan error
	stop   func() bool // of its withdrawal on the steer's ctx
}

func newClient(p *provider) *client {
	c := &client{p: p, sys: p.cfg.Node.System().ActorSystem(), runs: map[string]*placed{}, hosts: map[string]bool{}, steers: map[uint64]*pendingSteer{}}
	// Its Receive never blocks (answers go to buffered channels, events
	// to the Service's sink), so it runs on the sender's goroutine: one
	// scheduling hop less for every message of a remote run.
	c.self = c.sys.Root.SpawnPrefix(inline.Props(func() actor.Actor { return c }), "remote-"+p.cfg.Name+"-")
	return c
}

func (c *client) send(msg any) { c.sys.Root.Send(c.self, msg) }

// fromHost returns the run a message from a run's host is about, or nil
// when there is none, or the sender is not its host's node (K3).
func (c *client) fromHost(ctx actor.Context, id string) *placed {
	pl := c.runs[id]
	if pl == nil || ctx.Sender() == nil || ctx.Sender().Address != pl.run.node.Address {
		return nil
	}
	return pl
}

func (c *client) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case placeRun:
		c.place(ctx, m)
	case unanswered:
		if pl := c.runs[m.run]; pl != nil && !pl.accepted {
			// A late admission is abandoned as it comes (unknown run).
			pl.answerStart(fmt.Errorf("%w: node %s did not answer the start within %s", errLostBeforeAccepted, pl.run.node.ID, c.p.cfg.Node.LossBound()))
			c.finish(pl)
		}
	case *messages.RemoteRefused:
		if pl := c.fromHost(ctx, m.GetRunId()); pl != nil && !pl.accepted {
			pl.answerStart(&refusedError{Node: pl.run.node.ID, Code: m.GetCode(), Reason: m.GetReason()})
			c.finish(pl)
		}
	case *messages.RemoteAccepted:
		pl := c.fromHost(ctx, m.GetRunId())
		if pl == nil {
			// A start this client gave up before it was admitted.
			if ctx.Sender() != nil {
				ctx.Request(ctx.Sender(), &messages.RemoteAbandon{RunId: m.GetRunId()})
			}
			return
		}
		c.admitted(ctx, pl, m.GetCapacity(), m.GetRuns())
	case *messages.RemoteStarted:
		pl := c.fromHost(ctx, m.GetRunId())
		if pl == nil || pl.pid != nil {
			if pl == nil && ctx.Sender() != nil {
				ctx.Request(ctx.Sender(), &messages.Dispose{}) // one this client gave up
			}
			return
		}
		c.admitted(ctx, pl, m.GetCapacity(), m.GetRuns()) // a quick start's only answer before it
		pl.pid = ctx.Sender()
		pl.run.steerable = m.GetSteerable()
		pl.answerStart(nil)
		if pl.disposing {
			ctx.Request(pl.pid, &messages.Dispose{})
		}
	case *messages.RemoteStartFailed:
		if pl := c.fromHost(ctx, m.GetRunId()); pl != nil {
			pl.answerStart(&refusedError{Node: pl.run.node.ID, Code: m.GetCode(), Reason: m.GetReason()})
			c.finish(pl)
		}
	case *messages.RunProgress:
		if pl := c.fromHost(ctx, m.GetRunId()); pl != nil && pl.run.events != nil {
			c.announce(pl)
			ev, _ := wire.ToEvent(m)
			if pr, ok := ev.(subagent.RunProgress); ok {
				pr.RunID = pl.run.id
				pl.run.events.Emit(pr)
			}
		}
	case *messages.RunSettled:
		if pl := c.fromHost(ctx, m.GetRunId()); pl != nil {
			var err error
			if m.GetError() != "" {
				err = fmt.Errorf("remote: node %s: %s", pl.run.node.ID, m.GetError())
			}
			pl.run.settle(wire.ToResult(m.GetResult()), err)
		}
	case *messages.SteerAnswer:
		s := c.steers[m.GetSteerId()]
		if s == nil || c.fromHost(ctx, s.run) == nil {
			return
		}
		delete(c.steers, m.GetSteerId())
		s.stop()
		if m.GetAdmitted() {
			s.answer <- nil
		} else {
			s.answer <- fmt.Errorf("%w: %s", subagent.ErrNotDelivered, m.GetReason())
		}
	case *messages.RunQuiesced:
		if pl := c.fromHost(ctx, m.GetRunId()); pl != nil {
			c.finish(pl)
		}
	case *actor.Terminated:
		c.hostLost(m)
	case abandon:
		pl := c.runs[m.run]
		if pl == nil {
			return
		}
		pl.answerStart(subagent.Cancelled(context.Canceled))
		if !pl.accepted {
			// Not admitted yet: the start ends now (a silent host would
			// hold it a loss bound); a late admission is abandoned as
			// it comes.
			ctx.Request(clusterwire.Host(pl.run.node.Address), &messages.RemoteAbandon{RunId: m.run})
			c.finish(pl)
			return
		}
		c.dispose(ctx, pl)
	case cancelRun:
		if pl := c.runs[m.run]; pl != nil && pl.pid != nil {
			ctx.Request(pl.pid, &messages.Cancel{Reason: m.reason})
		}
	case disposeRun:
		if pl := c.runs[m.run]; pl != nil {
			c.dispose(ctx, pl)
		}
	case steerRun:
		c.steer(ctx, m)
	case withdrawSteer:
		if s := c.steers[m.id]; s != nil {
			if pl := c.runs[s.run]; pl != nil && pl.pid != nil {
				ctx.Request(pl.pid, &messages.SteerWithdraw{SteerId: m.id})
			}
		}
	}
}

// admitted takes the host's word that it admitted the run (RemoteAccepted
// for a start that takes a while, or RemoteStarted), once.
func (c *client) admitted(ctx actor.Context, pl *placed, capacity, runs int64) {
	if pl.accepted {
		return
	}
	pl.accepted = true
	pl.deadline.Stop()
	ctx.Logger().Debug("remote: run placed", "run", pl.run.id, "member", pl.run.node.ID)
	c.announce(pl)
	c.p.heard(pl.run.node, capacity, runs)
}

// announce emits the run's first event, the member hosting it: before the
// hosted run's progress, which may come before its start's answer (and is
// held until the run's start event).
func (c *client) announce(pl *placed) {
	if pl.announced || pl.run.events == nil {
		return
	}
	pl.announced = true
	pl.run.events.Emit(subagent.RunProgress{RunID: pl.run.id, Kind: clusterwire.HostedBy, Text: pl.run.node.ID})
}

// place sends a start to its host, watching the host first if no run
// placed there is watching it already.
func (c *client) place(ctx actor.Context, m placeRun) {
	pl := &placed{run: m.run, started: m.started}
	c.runs[m.run.id] = pl
	host := clusterwire.Host(m.run.node.Address)
	if !c.hosts[host.Address] {
		c.hosts[host.Address] = true
		ctx.Watch(host)
	}
	to := host
	if m.to != nil {
		to = m.to // which hands it to that host
	}
	ctx.Request(to, m.start)
	// The admission has a deadline: an answer lost (to an earlier
	// member's connection to this address, say) or a host that stopped
	// answering fails the start within the loss bound.
	id := m.run.id
	pl.deadline = time.AfterFunc(c.p.cfg.Node.LossBound(), func() { c.send(unanswered{id}) })
}

func (c *client) steer(ctx actor.Context, m steerRun) {
	pl := c.runs[m.run]
	if pl == nil || pl.pid == nil || pl.disposing {
		m.answer <- fmt.Errorf("%w: the run is not live", subagent.ErrNotDelivered)
		return
	}
	c.nextSteer++
	id := c.nextSteer
	ctx.Request(pl.pid, &messages.Steer{SteerId: id, Content: wire.FromContent(m.content)})
	stop := context.AfterFunc(m.ctx, func() { c.send(withdrawSteer{id}) })
	c.steers[id] = &pendingSteer{run: m.run, answer: m.answer, stop: stop}
}

// dispose disposes the run actor, or, while the run is still starting,
// once it has started (or its start failed or its host was lost).
func (c *client) dispose(ctx actor.Context, pl *placed) {
	if pl.disposing {
		return
	}
	pl.disposing = true
	if pl.pid != nil {
		// A settled run is being disposed by its host already (see
		// cluster's tellStarted): its quiescence is on its way.
		if !pl.run.isSettled() {
			ctx.Request(pl.pid, &messages.Dispose{})
		}
	} else if pl.accepted {
		ctx.Request(clusterwire.Host(pl.run.node.Address), &messages.RemoteAbandon{RunId: pl.run.id})
	}
}

// hostLost settles every run on a host whose watch ended: its node died,
// froze or left the membership.
func (c *client) hostLost(m *actor.Terminated) {
	if !c.hosts[m.Who.Address] || m.Who.Id != clusterwire.HostName {
		return
	}
	delete(c.hosts, m.Who.Address)
	for _, pl := range c.runs {
		if pl.run.node.Address != m.Who.Address {
			continue
		}
		lost := &nodeLostError{Node: pl.run.node.ID, Address: pl.run.node.Address, Why: m.Why.String()}
		if pl.accepted {
			pl.answerStart(lost)
		} else {
			pl.answerStart(fmt.Errorf("%w: %w", errLostBeforeAccepted, lost))
		}
		pl.run.settle(subagent.Result{StopReason: subagent.Error, Detail: lost.Error(), Cause: lost}, nil)
		c.finish(pl)
	}
}

func (pl *placed) answerStart(err error) {
	if pl.started != nil {
		pl.started <- err
		pl.started = nil
	}
}

// finish answers everything still waiting on a run and forgets it: the
// hosted child quiesced, its start failed, or its node is gone.
func (c *client) finish(pl *placed) {
	delete(c.runs, pl.run.id)
	pl.deadline.Stop()
	if pl.accepted {
		c.p.ended(pl.run.node)
	}
	pl.answerStart(errors.New("remote: the hosted run ended before it started"))
	pl.run.settle(subagent.Result{StopReason: subagent.Error, Detail: "the hosted run ended without a result"}, nil)
	for id, s := range c.steers {
		if s.run == pl.run.id {
			s.stop()
			s.answer <- errRunEnded
			delete(c.steers, id)
		}
	}
	close(pl.run.quiesced)
}
