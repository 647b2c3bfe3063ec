package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// remoteRun is a run hosted on another node, seen through this node's
// proxy actor (R1: the Service's run id, no local agent, no local
// session).
type remoteRun struct {
	id        string
	node      cluster.Member
	events    subagent.EventSink
	sys       *actor.ActorSystem
	proxy     *actor.PID
	steerable bool // set by the proxy before Start returns

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
	r.sys.Root.Send(r.proxy, disposeRun{})
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
// and Steer waits for the hosting node's final answer, so a message is
// never left queued unknown to the caller.
func (r steerableRun) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	answer := make(chan error, 1)
	r.sys.Root.Send(r.proxy, steerRun{content: message, answer: answer, ctx: ctx})
	select {
	case err := <-answer:
		return err
	case <-r.quiesced:
		return errRunEnded
	}
}

var errRunEnded = fmt.Errorf("%w: the run ended", subagent.ErrNotDelivered)

// Local commands from the Run handle and Start to the proxy.
type (
	abandon struct{} // the caller's Start gave up: dispose whatever started
	// unanswered: the hosting node did not admit nor refuse the start
	// within its loss bound.
	unanswered struct{}
	cancelRun  struct{ reason string }
	disposeRun struct{}
	steerRun   struct {
		ctx     context.Context
		content []subagent.ContentBlock
		answer  chan error
	}
	withdrawSteer struct{ id uint64 }
)

// proxy is the caller's side of a hosted run: it forwards commands to the
// hosted actor and its answers and events back, and watches it.
type proxy struct {
	p        *provider
	run      *remoteRun
	host     *actor.PID
	hosted   *actor.PID
	start    *messages.RemoteStart
	started  chan error  // written once, then nil
	deadline *time.Timer // of the start handshake

	disposing bool
	done      bool
	nextSteer uint64
	steers    map[uint64]chan error
}

func (p *proxy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(p.host)
		ctx.Request(p.host, p.start)
		// The start handshake has a deadline: an answer lost (to an
		// earlier member's connection to this address, say) or a host
		// that stopped answering fails the start within the loss bound.
		self, sys := ctx.Self(), ctx.ActorSystem()
		p.deadline = time.AfterFunc(p.p.cfg.Node.LossBound(), func() { sys.Root.Send(self, unanswered{}) })
	case unanswered:
		if p.hosted == nil && !p.done {
			// A late acceptance goes to a stopped proxy: the hosted
			// actor finds its caller gone and disposes the run.
			p.answerStart(fmt.Errorf("%w: node %s did not answer the start within %s", errLostBeforeAccepted, p.run.node.ID, p.p.cfg.Node.LossBound()))
			p.finish(ctx)
		}
	case *messages.RemoteRefused:
		if p.hosted == nil {
			p.answerStart(&refusedError{Node: p.run.node.ID, Code: m.GetCode(), Reason: m.GetReason()})
			p.finish(ctx)
		}
	case *messages.RemoteAccepted:
		if p.hosted != nil || ctx.Sender() == nil || ctx.Sender().Address != p.host.Address {
			return
		}
		p.hosted = ctx.Sender()
		ctx.Logger().Debug("remote: run placed", "run", p.run.id, "member", p.run.node.ID)
		if p.run.events != nil {
			// Before the hosted run's progress, which the same actor
			// sends; held until the run's start event.
			p.run.events.Emit(subagent.RunProgress{RunID: p.run.id, Kind: clusterwire.HostedBy, Text: p.run.node.ID})
		}
		p.deadline.Stop()
		p.p.heard(Load{Member: p.run.node, Capacity: m.GetCapacity(), Runs: m.GetRuns()})
		ctx.Unwatch(p.host)
		ctx.Watch(p.hosted)
		if p.disposing {
			ctx.Request(p.hosted, &messages.Dispose{})
		}
	case *messages.RemoteStarted:
		p.run.steerable = m.GetSteerable()
		p.answerStart(nil)
	case *messages.RemoteStartFailed:
		p.answerStart(&refusedError{Node: p.run.node.ID, Code: m.GetCode(), Reason: m.GetReason()})
	case *messages.RunProgress:
		if p.run.events != nil {
			ev, _ := wire.ToEvent(m)
			if pr, ok := ev.(subagent.RunProgress); ok {
				pr.RunID = p.run.id
				p.run.events.Emit(pr)
			}
		}
	case *messages.RunSettled:
		var err error
		if m.GetError() != "" {
			err = fmt.Errorf("remote: node %s: %s", p.run.node.ID, m.GetError())
		}
		p.run.settle(wire.ToResult(m.GetResult()), err)
	case *messages.SteerAnswer:
		if ch, ok := p.steers[m.GetSteerId()]; ok {
			delete(p.steers, m.GetSteerId())
			if m.GetAdmitted() {
				ch <- nil
			} else {
				ch <- fmt.Errorf("%w: %s", subagent.ErrNotDelivered, m.GetReason())
			}
		}
	case *messages.RunQuiesced:
		if p.hosted != nil {
			// Release the hosted actor: everything it sent came first.
			ctx.Unwatch(p.hosted)
			ctx.Request(p.hosted, &messages.Dispose{})
		}
		p.finish(ctx)
	case *actor.Terminated:
		if p.done {
			return
		}
		lost := &nodeLostError{Node: p.run.node.ID, Address: p.run.node.Address, Why: m.Why.String()}
		if p.hosted == nil {
			p.answerStart(fmt.Errorf("%w: %w", errLostBeforeAccepted, lost))
		} else {
			p.answerStart(lost)
		}
		p.run.settle(subagent.Result{StopReason: subagent.Error, Detail: lost.Error(), Cause: lost}, nil)
		p.finish(ctx)
	case abandon:
		p.answerStart(subagent.Cancelled(context.Canceled))
		if p.hosted == nil {
			// Not admitted yet: the start ends now (a silent host would
			// hold it a loss bound), and as at the deadline a late
			// acceptance goes to a stopped proxy, whose hosted actor
			// disposes the run.
			p.finish(ctx)
			return
		}
		p.disposeHosted(ctx)
	case cancelRun:
		if p.hosted != nil && !p.done {
			ctx.Request(p.hosted, &messages.Cancel{Reason: m.reason})
		}
	case disposeRun:
		p.disposeHosted(ctx)
	case steerRun:
		if p.hosted == nil || p.done || p.disposing {
			m.answer <- fmt.Errorf("%w: the run is not live", subagent.ErrNotDelivered)
			return
		}
		p.nextSteer++
		id := p.nextSteer
		p.steers[id] = m.answer
		ctx.Request(p.hosted, &messages.Steer{SteerId: id, Content: wire.FromContent(m.content)})
		self, sys := ctx.Self(), ctx.ActorSystem()
		context.AfterFunc(m.ctx, func() { sys.Root.Send(self, withdrawSteer{id}) })
	case withdrawSteer:
		if _, pending := p.steers[m.id]; pending && !p.done {
			ctx.Request(p.hosted, &messages.SteerWithdraw{SteerId: m.id})
		}
	}
}

func (p *proxy) disposeHosted(ctx actor.Context) {
	if p.disposing || p.done {
		return
	}
	p.disposing = true
	if p.hosted != nil {
		ctx.Request(p.hosted, &messages.Dispose{})
	}
	// Not yet accepted: RemoteAccepted (then dispose), a refusal or the
	// host's loss follows.
}

func (p *proxy) answerStart(err error) {
	if p.started != nil {
		p.started <- err
		p.started = nil
	}
}

// finish answers everything still waiting and stops the proxy: the
// hosted child quiesced, or its node is gone.
func (p *proxy) finish(ctx actor.Context) {
	if p.done {
		return
	}
	p.done = true
	p.deadline.Stop()
	if p.hosted != nil {
		p.p.ended(p.run.node)
	}
	p.answerStart(errors.New("remote: the hosted run ended before it started"))
	p.run.settle(subagent.Result{StopReason: subagent.Error, Detail: "the hosted run ended without a result"}, nil)
	for id, ch := range p.steers {
		ch <- errRunEnded
		delete(p.steers, id)
	}
	close(p.run.quiesced)
	ctx.Stop(ctx.Self())
}
