// Package registry is the Service callers use (the seed's ctx.subagents) and
// the registry actor behind it.
//
// The Service is safe for concurrent use. Its registry actor holds providers
// in insertion order and one parent actor per delegating agent; its mailbox
// is the lock. Provider code never runs inside an actor: Start calls the
// provider on the caller's goroutine and reports to the parent actor by
// message.
package registry

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/actors/parent"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Service registers providers and starts children through them.
type Service struct {
	sys       *actor.ActorSystem
	pid       *actor.PID
	closeOnce sync.Once
	closed    chan struct{}
}

// DefaultIdleParents is how many idle parent actors a Service keeps.
const DefaultIdleParents = 1024

// Option configures a Service.
type Option func(*registryActor)

// WithIdleParents sets how many parent actors with no live run and no
// listener are kept for their agents' next delegation; older ones are
// retired. A parent agent that delegates again soon then skips spawning a
// new one, and an embedder with many short-lived agents holds at most n.
func WithIdleParents(n int) Option { return func(a *registryActor) { a.maxIdle = max(n, 0) } }

// New starts a Service on sys.
func New(sys *actors.System, opts ...Option) *Service {
	a := &registryActor{
		log:       sys.Logger(),
		providers: map[string]entry{},
		parents:   map[string]*parentRef{},
		idle:      list.New(),
		maxIdle:   DefaultIdleParents,
		listeners: fanout.New(sys.Logger()),
	}
	for _, o := range opts {
		o(a)
	}
	raw := sys.ActorSystem()
	pid := raw.Root.SpawnPrefix(inline.Props(func() actor.Actor { return a }), "subagent-registry-")
	return &Service{sys: raw, pid: pid, closed: make(chan struct{})}
}

// Close stops the registry, its parent actors and listeners. Runs already
// returned to callers are theirs to dispose.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		_ = s.sys.Root.PoisonFuture(s.pid).Wait()
		close(s.closed)
	})
}

// command is a local command: it is answered on the reply.To it embeds.
type command interface {
	Wait(ctx context.Context, gone <-chan struct{}) (any, error)
}

// call sends cmd to an actor of this Service and waits for its answer; the
// actor answers at once, so only a closed Service makes it fail.
func (s *Service) call(ctx context.Context, to *actor.PID, cmd command) (any, error) {
	s.sys.Root.Send(to, cmd)
	r, err := cmd.Wait(ctx, s.closed)
	if errors.Is(err, reply.ErrGone) {
		return nil, subagent.ErrServiceClosed
	}
	return r, err
}

// RegisterProvider registers p by its name (S1). The returned release
// unregisters it: new starts on the name then fail with ErrNoProvider, runs
// already returned are untouched. Release is idempotent.
func (s *Service) RegisterProvider(p subagent.Provider) (release func(), err error) {
	if p == nil || p.Name() == "" {
		return nil, fmt.Errorf("%w: nil provider or empty name", subagent.ErrInvalidProviderArg)
	}
	r, err := s.call(context.Background(), s.pid, &register{To: reply.New(), p: p})
	if err != nil {
		return nil, err
	}
	reg := r.(registered)
	if reg.err != nil {
		return nil, reg.err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_, _ = s.call(context.Background(), s.pid, &unregister{To: reply.New(), name: p.Name(), gen: reg.gen})
		})
	}, nil
}

// GetProvider returns the provider registered under name (S2).
func (s *Service) GetProvider(name string) (subagent.Provider, bool) {
	r, err := s.call(context.Background(), s.pid, &getProvider{To: reply.New(), name: name})
	if err != nil || r == nil {
		return nil, false
	}
	p, ok := r.(subagent.Provider)
	return p, ok && p != nil
}

// List returns provider names in insertion order (S3).
func (s *Service) List() []string {
	r, err := s.call(context.Background(), s.pid, &listNames{To: reply.New()})
	if err != nil {
		return nil
	}
	return r.([]string)
}

// Listen subscribes l to provider-added and provider-removed events. It
// returns once l has received provider-added for every provider already
// registered, so a consumer follows registrations whatever order it and the
// providers were set up in (E4). See listening for release.
func (s *Service) Listen(l subagent.Listener) (release func()) {
	r, err := s.call(context.Background(), s.pid, &listen{To: reply.New(), l: l})
	if err != nil {
		return func() {}
	}
	pid := r.(*actor.PID)
	_, _ = s.call(context.Background(), pid, &fanout.Sync{To: reply.New()})
	return s.listening(func() command { return &unlisten{To: reply.New(), id: pid.Id} }, s.pid)
}

// ListenParent subscribes l to the run events of children delegated by the
// agent whose id is parentID (E3). See listening for release.
func (s *Service) ListenParent(parentID string, l subagent.Listener) (release func()) {
	r, err := s.call(context.Background(), s.pid, &parentOf{To: reply.New(), parentID: parentID})
	if err != nil {
		return func() {}
	}
	owner := r.(*actor.PID)
	r, err = s.call(context.Background(), owner, &parent.Subscribe{To: reply.New(), Listener: l})
	if err != nil {
		return func() {}
	}
	id := r.(*actor.PID).Id
	return s.listening(func() command { return &parent.Unsubscribe{To: reply.New(), ID: id} }, owner)
}

// listening returns the release of a listener: it asks the owner actor to
// stop sending events, then waits until the listener has handled every
// event sent before, so l is never called after release returns. Release
// is idempotent; do not call it from inside l.
func (s *Service) listening(unsubscribe func() command, owner *actor.PID) (release func()) {
	var once sync.Once
	return func() {
		once.Do(func() {
			r, err := s.call(context.Background(), owner, unsubscribe())
			if pid, ok := r.(*actor.PID); err == nil && ok && pid != nil {
				_, _ = s.call(context.Background(), pid, &fanout.Drain{To: reply.New()})
			}
		})
	}
}

// Start validates req against the provider named name as registered at
// this instant, then waits for the provider until a real child is ready and
// returns the caller-owned Run (S4). ctx is the run's cancellation channel
// (S5): ended before publication, Start returns its error after rollback;
// ended after, the live child is cancelled and settles with a non-completed
// stop reason.
func (s *Service) Start(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error) {
	return s.open(ctx, name, req, false)
}

// Resume continues a durable child through a provider that can resume, and
// observes the returned run exactly like Start (S6). Descriptor lookup and
// authorization are the caller's.
func (s *Service) Resume(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error) {
	return s.open(ctx, name, req, true)
}

func (s *Service) open(ctx context.Context, name string, req subagent.StartRequest, resume bool) (subagent.Run, error) {
	if ctx == nil {
		return nil, subagent.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.Cancelled(err)
	}
	r, err := s.call(ctx, s.pid, &getProvider{To: reply.New(), name: name})
	if err != nil {
		return nil, contextual(ctx, err)
	}
	p, _ := r.(subagent.Provider)
	if p == nil {
		return nil, fmt.Errorf("%w: %q", subagent.ErrNoProvider, name)
	}
	if err := validate(p, req, resume); err != nil {
		return nil, err
	}
	var run subagent.Run
	if resume {
		run, err = p.(subagent.Resumer).Resume(ctx, req)
	} else {
		run, err = p.Start(ctx, req)
	}
	if err != nil {
		return nil, contextual(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		// Ended before publication: no published child may escape.
		_ = run.Dispose(context.Background())
		return nil, subagent.Cancelled(err)
	}
	if err := s.publish(req.Parent.ID(), name, run); err != nil {
		_ = run.Dispose(context.Background())
		return nil, err
	}
	return run, nil
}

// publish tells the parent actor about the run, then attaches the result
// observer: the Published message is enqueued before any Settled can be, so
// subagent/start precedes subagent/end (E1). The run id is minted here and
// shared by both events (E2); local comes from the provider's exact agent.
func (s *Service) publish(parentID, provider string, run subagent.Run) error {
	r, err := s.call(context.Background(), s.pid, &parentOf{To: reply.New(), parentID: parentID})
	if err != nil {
		return err
	}
	parentPID := r.(*actor.PID)
	runID := uuid.NewString()
	s.sys.Root.Send(parentPID, &messages.Published{
		RunId: runID, Provider: provider, Id: run.ID(), Local: run.LocalAgent() != nil,
	})
	run.OnSettled(func(res subagent.Result, err error) {
		settled := &messages.Settled{RunId: runID, Result: messages.FromResult(res)}
		if err != nil {
			settled.Error = err.Error()
		}
		s.sys.Root.Send(parentPID, settled)
	})
	return nil
}

// contextual reports an error as a cancellation when ctx has ended.
func contextual(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, subagent.ErrCancelled) {
		return errors.Join(subagent.Cancelled(cerr), err)
	}
	return err
}

type duplicateError struct{ name string }

func (e *duplicateError) Error() string {
	return fmt.Sprintf("subagent: duplicate provider %q", e.name)
}
func (e *duplicateError) Unwrap() error { return subagent.ErrDuplicateProvider }
