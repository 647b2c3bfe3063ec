package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/subagent"
)

// Errors of continuable children.
var (
	// ErrNoTasks means the Service has no task manager (WithTasks), which
	// continuable children run under.
	ErrNoTasks = errors.New("registry: continuable children need a task manager (WithTasks)")
	// errNotSteerable means a child's live activation cannot be steered
	// (an ACP child, say): the follow-up was not delivered.
	errNotSteerable = fmt.Errorf("%w: the child's live activation cannot be steered", subagent.ErrNotDelivered)
	// ErrNotContinuable means the child id names no continuable child of
	// the asking parent (another parent's child, a one-shot child, or no
	// child at all): nothing was delivered or stored. Ownership, not the
	// follow-up's source, authorises a follow-up (S8).
	ErrNotContinuable = fmt.Errorf("%w: not a continuable child of this parent", subagent.ErrNotDelivered)
)

// closeWait bounds how long Close waits for the continuable activations it
// kills to quiesce.
const closeWait = 10 * time.Second

// WithTasks gives the Service a task manager, which continuable children
// run under (S7, S8). Without one, StartContinuable and SendMessage fail
// with ErrNoTasks.
func WithTasks(m *tasks.Manager) Option { return func(o *options) { o.Tasks = m } }

// CanContinue reports whether the Service can start continuable children:
// it has a task manager (WithTasks). Their provider must resume, too.
func (s *Service) CanContinue() bool { return s.opts.Tasks != nil }

// Continuable is a durable child started with StartContinuable.
type Continuable struct {
	ChildID string // the child's durable id: its session id
	Task    tasks.Task
}

// StartContinuable starts a durable child whose follow-ups go through
// SendMessage (S7): it allocates the child's durable id (its session id,
// which the provider creates together with the child's descriptor) and
// runs the first activation as a background task of the parent, recorded
// as an activation of a continuable child before any provider code runs.
// It needs the task manager and a provider that can resume; each missing
// one is a typed error before anything starts.
func (s *Service) StartContinuable(ctx context.Context, provider string, req subagent.StartRequest) (Continuable, error) {
	if s.opts.Tasks == nil {
		return Continuable{}, ErrNoTasks
	}
	p, ok := s.GetProvider(provider)
	if !ok {
		return Continuable{}, fmt.Errorf("%w: %q", subagent.ErrNoProvider, provider)
	}
	if _, ok := p.(subagent.Resumer); !ok {
		return Continuable{}, fmt.Errorf("%w: %q", subagent.ErrNotResumable, provider)
	}
	if isNil(req.Parent) {
		return Continuable{}, invalid("parent", "a delegating parent agent is required")
	}
	childID := ids.New()
	parentID := req.Parent.SessionID()
	// A new id: its route is idle, so this follow-up is its starter.
	if _, err := s.follow(ctx, parentID, childID, false); err != nil {
		return Continuable{}, err
	}
	task, err := s.activate(ctx, provider, req, childID, false)
	if err != nil {
		return Continuable{}, err
	}
	return Continuable{ChildID: childID, Task: task}, nil
}

// Route says how SendMessage delivered a follow-up.
type Route string

// Routes.
const (
	Steered Route = "steered" // into the live activation's next model request
	Started Route = "started" // as the prompt of a new activation, resumed from the child's log
)

// Delivery is what SendMessage did.
type Delivery struct {
	Route Route
	// Task is the activation's task when Route is Started.
	Task tasks.Task
}

// SendMessage delivers a follow-up to the continuable child childID of
// parent (S8). Only the parent that started the child may: any other
// childID is ErrNotContinuable, with nothing stored. source attributes the
// message (the user, or a coordinating agent and its session id); it is
// stored with it and authorises nothing.
//
// A live activation is steered (Steered, once the message was admitted
// into a request the model saw). An idle child gets a new activation,
// resumed from its log with the message as its prompt (Started, with its
// task), but only once the previous activation settled and its task is
// terminal: a follow-up that arrives while an activation finishes joins
// the next one. Follow-ups are routed in one mailbox per Service, so one
// child never has two live activations, and each is delivered once, in
// admission order. If ctx ends while the follow-up waits (for admission,
// or for an activation to start or finish), the shared activation is
// cancelled and the call returns ctx's error only once it quiesced.
func (s *Service) SendMessage(ctx context.Context, parentAgent subagent.Agent, childID string, message []subagent.ContentBlock, source string) (Delivery, error) {
	switch {
	case s.opts.Tasks == nil:
		return Delivery{}, ErrNoTasks
	case isNil(parentAgent):
		return Delivery{}, invalid("parent", "a delegating parent agent is required")
	case len(message) == 0:
		return Delivery{}, invalid("message", "must not be empty")
	}
	parentID := parentAgent.SessionID()
	provider, ok, err := s.opts.Tasks.Continuable(ctx, parentID, childID)
	switch {
	case err != nil:
		return Delivery{}, err
	case !ok:
		return Delivery{}, fmt.Errorf("%w: %q", ErrNotContinuable, childID)
	}
	attributed := make([]subagent.ContentBlock, len(message))
	for i, b := range message {
		b.Source = source
		attributed[i] = b
	}
	front := false
	for {
		ans, err := s.follow(ctx, parentID, childID, front)
		if err != nil {
			return Delivery{}, err
		}
		if ans.toStart {
			req := subagent.StartRequest{Parent: parentAgent, Prompt: attributed, Continuation: &subagent.Continuation{SessionID: childID}}
			task, err := s.activate(ctx, provider, req, childID, true)
			if err != nil {
				return Delivery{}, err
			}
			return Delivery{Route: Started, Task: task}, nil
		}
		st, ok := ans.run.(subagent.Steerer)
		if !ok {
			return Delivery{}, errNotSteerable
		}
		err = st.Steer(ctx, attributed)
		switch {
		case err == nil:
			return Delivery{Route: Steered}, nil
		case ctx.Err() != nil:
			// The shared activation is cancelled, and the caller hears of
			// it only once it has quiesced.
			return Delivery{}, errors.Join(contextual(ctx, err), s.cancelActivation(parentID, ans.task))
		case errors.Is(err, subagent.ErrNotDelivered):
			// The activation is ending: the follow-up, not admitted,
			// joins the next one, ahead of those that came after it.
			s.sys.Root.Send(s.router, routeEvent{childID: childID, in: inRefused{run: ans.run}})
			front = true
		default:
			return Delivery{}, err
		}
	}
}

// follow asks the router how to deliver a follow-up to childID. If ctx
// ends first, the follow-up gives up: the activation it waited for is
// cancelled (or a start it was given is passed on) and follow returns
// ctx's error once that activation quiesced.
func (s *Service) follow(ctx context.Context, parentID, childID string, front bool) (routeAnswer, error) {
	if s.closing.Load() {
		return routeAnswer{}, subagent.ErrServiceClosed
	}
	to := new(reply.To)
	w := waiterID(s.waiters.Add(1))
	s.sys.Root.Send(s.router, &followUp{childID: childID, owner: parentID, w: w, to: to, front: front})
	r, err := to.Wait(ctx, s.closed)
	if errors.Is(err, reply.ErrGone) {
		return routeAnswer{}, subagent.ErrServiceClosed
	}
	if err == nil {
		return r.(routeAnswer), nil
	}
	s.sys.Root.Send(s.router, routeEvent{childID: childID, in: inGaveUp{w: w}})
	// The router answers every follow-up once: with the route it was
	// given before it gave up, or with what to cancel.
	r, werr := to.Wait(context.Background(), s.closed)
	if werr != nil {
		return routeAnswer{}, errors.Join(contextual(ctx, nil), subagent.ErrServiceClosed)
	}
	ans := r.(routeAnswer)
	if ans.toStart {
		s.sys.Root.Send(s.router, routeEvent{childID: childID, in: inStartFailed{}})
		return routeAnswer{}, contextual(ctx, nil)
	}
	return routeAnswer{}, errors.Join(contextual(ctx, nil), s.cancelActivation(parentID, ans.task))
}

// cancelActivation kills the activation task of parentID, if any, and
// waits until it quiesced, for closeWait at most.
func (s *Service) cancelActivation(parentID, task string) error {
	if task == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if _, err := s.opts.Tasks.Kill(ctx, parentID, task); err != nil {
		return err
	}
	_, err := s.opts.Tasks.Await(ctx, parentID, task)
	return err
}

// activate runs one activation of a continuable child as a task, its
// route having made the caller the starter: the route hears of the task,
// the live run, its settle and the task's end, or of a failed start.
func (s *Service) activate(ctx context.Context, provider string, req subagent.StartRequest, childID string, resume bool) (tasks.Task, error) {
	event := func(in routeInput) { s.sys.Root.Send(s.router, routeEvent{childID: childID, in: in}) }
	var recorded string // written before the start, read after it
	task, err := s.opts.Tasks.Start(ctx, tasks.Spec{
		Parent: req.Parent.SessionID(), Provider: provider, ChildID: childID, Continuable: true,
		Recorded: func(t tasks.Task) { recorded = t.ID; event(inRecorded{task: t.ID}) },
		Settled:  func() { event(inRunSettled{task: recorded}) },
		Ended:    func(t tasks.Task) { event(inEnded{task: t.ID}) },
	}, func(startCtx context.Context) (subagent.Run, error) {
		var run subagent.Run
		var err error
		if resume {
			run, err = s.Resume(startCtx, provider, req)
		} else {
			run, err = s.open(startCtx, provider, req, false, childID, true)
		}
		if err == nil {
			event(inActivated{run: run})
		}
		return run, err
	})
	if err != nil {
		event(inStartFailed{task: recorded})
		return tasks.Task{}, err
	}
	return task, nil
}

// killActivations kills every continuable activation and waits until each
// quiesced, for closeWait at most.
func (s *Service) killActivations() {
	if s.opts.Tasks == nil {
		return
	}
	r, err := s.call(context.Background(), s.router, &liveTasks{})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, t := range r.([]ownedTask) {
		wg.Go(func() { _ = s.cancelActivation(t.owner, t.task) })
	}
	wg.Wait()
}
