package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/subactor/subactor/internal/ids"

	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/subagent"
)

// Errors of continuable children.
var (
	// ErrNoTasks means the Service has no task manager (WithTasks), which
	// continuable children run under.
	ErrNoTasks = errors.New("registry: continuable children need a task manager (WithTasks)")
	// ErrNotSteerable means a child's live activation cannot be steered
	// (an ACP child, say): the follow-up was not delivered.
	ErrNotSteerable = fmt.Errorf("%w: the child's live activation cannot be steered", subagent.ErrNotDelivered)
)

// WithTasks gives the Service a task manager, which continuable children
// run under (S7, S8).
func WithTasks(m *tasks.Manager) Option { return func(o *Options) { o.Tasks = m } }

// Continuable is a durable child started with StartContinuable.
type Continuable struct {
	ChildID string // the child's durable id: its session id
	Task    tasks.Task
}

// StartContinuable starts a durable child whose follow-ups go through
// SendMessage (S7): it allocates the child's durable id (its session id,
// which the provider creates together with the child's descriptor) and
// runs the first activation as a background task of the parent. It needs
// the task manager and a provider that can resume; each missing one is a
// typed error before anything starts.
func (s *Service) StartContinuable(ctx context.Context, provider string, req subagent.StartRequest) (Continuable, error) {
	if s.opts.Tasks == nil {
		return Continuable{}, ErrNoTasks
	}
	if p, ok := s.GetProvider(provider); ok {
		if _, ok := p.(subagent.Resumer); !ok {
			return Continuable{}, fmt.Errorf("%w: %q", subagent.ErrNotResumable, provider)
		}
	}
	if isNil(req.Parent) {
		return Continuable{}, invalid("parent", "a delegating parent agent is required")
	}
	childID := ids.New()
	if err := s.routeTo(req.Parent.SessionID(), childID); err != nil {
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
// parent (S8): it steers the live activation, or, when none is live,
// starts a new task that resumes the child from its log with the message
// as its prompt. One child never has two activations: concurrent
// follow-ups are ordered by the parent's actor. If ctx ends while a live
// delivery waits for admission, the shared activation is cancelled and the
// call returns an error only once it has fully quiesced.
func (s *Service) SendMessage(ctx context.Context, parentAgent subagent.Agent, childID string, message []subagent.ContentBlock, provider string) (Delivery, error) {
	switch {
	case s.opts.Tasks == nil:
		return Delivery{}, ErrNoTasks
	case isNil(parentAgent):
		return Delivery{}, invalid("parent", "a delegating parent agent is required")
	case len(message) == 0:
		return Delivery{}, invalid("message", "must not be empty")
	}
	for {
		owner, err := s.parentPID(parentAgent.SessionID())
		if err != nil {
			return Delivery{}, err
		}
		cmd := &parent.Route{ChildID: childID}
		s.sys.Root.Send(owner, cmd)
		r, err := cmd.Wait(ctx, s.closed)
		if err != nil {
			// A start reserved for us after we gave up must not stay reserved.
			go func() {
				if r, err := cmd.Wait(context.Background(), s.closed); err == nil && r.(parent.Routed).Run == nil {
					s.release(parentAgent.SessionID(), childID, nil)
				}
			}()
			return Delivery{}, contextual(ctx, err)
		}
		live := r.(parent.Routed).Run
		if live == nil {
			return s.startActivation(ctx, parentAgent, childID, message, provider)
		}
		st, ok := live.(subagent.Steerer)
		if !ok {
			return Delivery{}, ErrNotSteerable
		}
		err = st.Steer(ctx, message)
		switch {
		case err == nil:
			return Delivery{Route: Steered}, nil
		case ctx.Err() != nil:
			// The shared activation is cancelled, and the caller hears of
			// it only once it has quiesced.
			return Delivery{}, errors.Join(contextual(ctx, err), live.Dispose(context.WithoutCancel(ctx)))
		case errors.Is(err, subagent.ErrNotDelivered):
			// The activation ended before its release reached the route:
			// release it now (a no-op if it already was) and route again.
			s.release(parentAgent.SessionID(), childID, live)
		default:
			return Delivery{}, err
		}
	}
}

// startActivation resumes an idle child with message as a new activation,
// the route being reserved for it.
func (s *Service) startActivation(ctx context.Context, parentAgent subagent.Agent, childID string, message []subagent.ContentBlock, provider string) (Delivery, error) {
	req := subagent.StartRequest{Parent: parentAgent, Prompt: message, Continuation: &subagent.Continuation{SessionID: childID}}
	task, err := s.activate(ctx, provider, req, childID, true)
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{Route: Started, Task: task}, nil
}

// activate runs one activation of a continuable child as a task, after
// its route was reserved: the route hears of the live run, and of its end
// or a failed start, so the next follow-up starts a new one.
func (s *Service) activate(ctx context.Context, provider string, req subagent.StartRequest, childID string, resume bool) (tasks.Task, error) {
	parentID := req.Parent.SessionID()
	task, err := s.opts.Tasks.Start(ctx, parentID, provider, func(context.Context) (subagent.Run, error) {
		// Not the caller's context: the activation outlives the call, and
		// the Service ties it to the parent's lifetime instead.
		var run subagent.Run
		var err error
		if resume {
			run, err = s.Resume(context.Background(), provider, req)
		} else {
			run, err = s.openAs(context.Background(), provider, req, childID)
		}
		if err != nil {
			return nil, err
		}
		s.tell(parentID, &parent.Activated{ChildID: childID, Run: run})
		run.OnSettled(func(subagent.Result, error) { s.release(parentID, childID, run) })
		return run, nil
	})
	if err != nil {
		s.release(parentID, childID, nil)
		return tasks.Task{}, err
	}
	return task, nil
}

// routeTo reserves the first activation of a new child.
func (s *Service) routeTo(parentID, childID string) error {
	owner, err := s.parentPID(parentID)
	if err != nil {
		return err
	}
	cmd := &parent.Route{ChildID: childID}
	s.sys.Root.Send(owner, cmd)
	_, err = cmd.Wait(context.Background(), s.closed) // a new id: answered at once
	return err
}

// release frees a child's route: its activation run ended, or (nil) a
// reserved start did not happen.
func (s *Service) release(parentID, childID string, run subagent.Run) {
	s.tell(parentID, &parent.Released{ChildID: childID, Run: run})
}

// tell sends msg to the parent actor of parentID with a reference of its
// own, so the actor is not retired meanwhile.
func (s *Service) tell(parentID string, msg any) {
	if owner, err := s.parentPID(parentID); err == nil {
		s.sys.Root.Send(owner, msg)
	}
}

// parentPID hands out a reference to the parent actor of parentID; the
// caller must use it at once with a message that counts (see parent.Idle).
func (s *Service) parentPID(parentID string) (*actor.PID, error) {
	r, err := s.call(context.Background(), s.pid, &parentOf{parentID: parentID})
	if err != nil {
		return nil, err
	}
	return r.(*parentRef).pid, nil
}
