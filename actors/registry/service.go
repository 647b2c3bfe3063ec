// Package registry is the Service callers use to register providers and to
// start, resume, steer and follow their children, and the registry actor
// behind it.
//
// The Service is safe for concurrent use. Its registry actor holds providers
// in insertion order and one parent actor per parent session someone
// listens to (ListenParent); its mailbox is the lock. Provider code never
// runs inside an actor: Start calls the provider on the caller's goroutine
// and reports to the parent actor, if the run has one, by message.
// Listener code runs on a goroutine of its own per listener, never on an
// actor's; a listener that is an actor (SendTo) is sent the events as
// messages.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/subagent"
)

// Service registers providers and starts children through them.
type Service struct {
	sys       *actor.ActorSystem
	log       *slog.Logger
	pid       *actor.PID
	opts      options
	closeOnce sync.Once
	closing   atomic.Bool // set first by Close: no follow-up is routed after it
	closed    chan struct{}
	// live is every run bound and not yet released (see bind): Close
	// cancels them all, and a run bound after Close began is cancelled
	// at once (ended set).
	live    runList
	router  *actor.PID // routes follow-ups to continuable children
	waiters atomic.Uint64
}

// runList is the runs of a Service, linked through themselves: a run
// costs its Service no allocation and no context registration.
type runList struct {
	mu    sync.Mutex
	first *started
	ended bool
}

// add links st, or reports false once the Service has begun to close.
func (l *runList) add(st *started) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	st.next = l.first
	if l.first != nil {
		l.first.prev = st
	}
	l.first = st
	return true
}

// remove unlinks st if it is linked.
func (l *runList) remove(st *started) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.prev != nil {
		st.prev.next = st.next
	} else if l.first == st {
		l.first = st.next
	}
	if st.next != nil {
		st.next.prev = st.prev
	}
	st.prev, st.next = nil, nil
}

// end refuses later adds and returns the cancels of the runs linked now.
func (l *runList) end() []context.CancelCauseFunc {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	var all []context.CancelCauseFunc
	for st := l.first; st != nil; st = st.next {
		all = append(all, st.cancel)
	}
	return all
}

// defaultIdleParents is how many idle parent actors a Service keeps. A
// few hundred cover the agents that delegate again soon; past them, a
// new parent session takes over the oldest idle actor, whose memory a
// longer list would only have let go cold.
const defaultIdleParents = 256

// options configure a Service. New starts from the defaults and applies
// each Option in turn.
type options struct {
	IdleParents int
	RunRestarts subagent.RestartPolicy
	Tasks       *tasks.Manager
}

// Option configures a Service.
type Option func(*options)

// WithIdleParents sets how many parent actors with no live run and no
// listener are kept for their sessions' next subscription (default 256;
// negative counts as 0); older ones are retired. A parent session
// listened to again soon then skips spawning a new one, and an embedder
// with many short-lived listeners holds at most this many.
func WithIdleParents(n int) Option { return func(o *options) { o.IdleParents = max(n, 0) } }

// WithRunRestarts sets how often a continuable run's child is relaunched
// from its last checkpoint after a crash (A2). Default: never.
func WithRunRestarts(p subagent.RestartPolicy) Option { return func(o *options) { o.RunRestarts = p } }

// New starts a Service's registry actor on sys with opts (WithTasks,
// WithRunRestarts, ...). The Service has no provider
// until RegisterProvider; Close stops it and every run actor under it,
// while sys stays the caller's.
func New(sys *actors.System, opts ...Option) *Service {
	o := options{IdleParents: defaultIdleParents}
	for _, f := range opts {
		f(&o)
	}
	a := &registryActor{
		log:       sys.ActorSystem().Logger(),
		providers: map[string]entry{},
		parents:   map[string]*parentRef{},
		maxIdle:   o.IdleParents,
	}
	raw := sys.ActorSystem()
	pid := raw.Root.SpawnPrefix(inline.Props(func() actor.Actor { return a }), "subagent-registry-")
	router := &routerActor{routes: map[string]*childRoute{}, waiters: map[waiterID]*reply.To{}}
	rpid := raw.Root.SpawnPrefix(inline.Props(func() actor.Actor { return router }), "subagent-router-")
	return &Service{sys: raw, log: sys.ActorSystem().Logger(), pid: pid, opts: o, closed: make(chan struct{}), router: rpid}
}

// Close kills every live activation of a continuable child (its task
// ends killed, a pending start is cancelled) and waits for them to
// quiesce, for ten seconds at most; it cancels every live child (each
// settles aborted, cause subagent.ErrServiceClosed), then stops the
// registry and its parent actors and releases every listener. It never
// waits for a listener's own code (E5). Callers still dispose the runs
// they hold; Dispose then returns once the child has returned.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.killActivations()
		for _, cancel := range s.live.end() {
			cancel(subagent.ErrServiceClosed)
		}
		_ = s.sys.Root.PoisonFuture(s.pid).Wait()
		_ = s.sys.Root.PoisonFuture(s.router).Wait()
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
// already returned are untouched. Release is idempotent. A name already
// taken fails with an error matching subagent.ErrDuplicateProvider.
func (s *Service) RegisterProvider(p subagent.Provider) (release func(), err error) {
	if isNil(p) || p.Name() == "" {
		return nil, fmt.Errorf("%w: nil provider or empty name", subagent.ErrInvalidProviderArg)
	}
	r, err := s.call(context.Background(), s.pid, &register{p: p})
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
			_, _ = s.call(context.Background(), s.pid, &unregister{name: p.Name(), gen: reg.gen})
		})
	}, nil
}

// GetProvider returns the provider registered under name (S2).
func (s *Service) GetProvider(name string) (subagent.Provider, bool) {
	// r is nil when no provider has the name or the call failed.
	r, _ := s.call(context.Background(), s.pid, &getProvider{name: name})
	p, ok := r.(subagent.Provider)
	return p, ok
}

// List returns provider names in insertion order (S3).
func (s *Service) List() []string {
	r, err := s.call(context.Background(), s.pid, &listNames{})
	if err != nil {
		return nil
	}
	return r.([]string)
}

func (s *Service) newSub(l subagent.Listener, opts []ListenOption) *fanout.Sub {
	c := readListen(opts)
	if c.to != nil {
		return fanout.NewSubTo(c.to, s.log, c.types)
	}
	return fanout.NewSub(l, s.log, c.bound, c.types)
}

// Listen subscribes l to provider-added and provider-removed events. It
// returns once l has received provider-added for every provider already
// registered, so a consumer follows registrations whatever order it and the
// providers were set up in (E4).
func (s *Service) Listen(l subagent.Listener, opts ...ListenOption) subagent.Subscription {
	sub := s.newSub(l, opts)
	x := &subscription{s: s, owner: s.pid, sub: sub}
	if _, err := s.call(context.Background(), s.pid, &listen{sub: sub}); err != nil {
		sub.Release()
		return x
	}
	_ = x.Flush(context.Background())
	return x
}

// ListenParent subscribes l to the run events (start, progress, end) of
// children delegated by the parent whose session id is parentSessionID
// (E3, E6): every run started after it returned, from its start; a run
// started before, not at all, so l never hears an end without its start.
// Events of one run arrive in order; see subagent.Listener for what a
// slow or failing listener costs.
func (s *Service) ListenParent(parentSessionID string, l subagent.Listener, opts ...ListenOption) subagent.Subscription {
	sub := s.newSub(l, opts)
	r, err := s.call(context.Background(), s.pid, &parentOf{parentID: parentSessionID, sub: sub})
	if err != nil {
		sub.Release()
		return &subscription{s: s, sub: sub}
	}
	ref := r.(*parentRef)
	return &subscription{s: s, owner: ref.pid, ref: ref, sub: sub}
}

// subscription implements subagent.Subscription over a fanout.Sub owned by
// an actor of the Service.
type subscription struct {
	s     *Service
	owner *actor.PID
	ref   *parentRef // a parent's subscription: its parent actor's
	sub   *fanout.Sub
	once  sync.Once
}

func (x *subscription) Release() {
	x.once.Do(func() {
		// A parent actor that dropped its stopped subscriber has told
		// the registry already.
		if x.sub.Release() && x.ref != nil {
			x.s.sys.Root.Send(x.s.pid, &unsubscribed{ref: x.ref})
		}
		if x.owner != nil {
			x.s.sys.Root.Send(x.owner, &fanout.Unsubscribe{Sub: x.sub})
		}
	})
}

func (x *subscription) Flush(ctx context.Context) error {
	if x.owner == nil {
		return subagent.ErrServiceClosed
	}
	marker := make(chan struct{})
	x.s.sys.Root.Send(x.owner, &fanout.Flush{Sub: x.sub, Marker: marker})
	select {
	case <-marker:
		return nil
	case <-x.sub.Done():
		return nil
	case <-x.s.closed:
		return subagent.ErrServiceClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start validates req against the provider named name as registered at
// this instant, then waits for the provider until a real child is ready and
// returns the caller-owned Run (S4). ctx is the run's cancellation channel
// (S5): ended before publication, Start returns its error after rollback;
// ended after, the live child is cancelled and settles with a non-completed
// stop reason. A request with a Continuation is refused: it goes to
// Resume.
func (s *Service) Start(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error) {
	return s.open(ctx, name, req, false, "", false)
}

// Resume continues a durable child through a provider that can resume, and
// observes the returned run exactly like Start (S6). Descriptor lookup and
// authorization are the caller's.
func (s *Service) Resume(ctx context.Context, name string, req subagent.StartRequest) (subagent.Run, error) {
	return s.open(ctx, name, req, true, "", false)
}

// StartAs is Start for a run whose id the caller chose, which a provider
// that stores its children takes as the child's session id: a
// continuable child's first activation, or a delegation named after its
// tool call, so that the child can be found from the call after a crash
// (S9). runID must be new.
func (s *Service) StartAs(ctx context.Context, name string, req subagent.StartRequest, runID string) (subagent.Run, error) {
	if runID == "" {
		return nil, invalid("runID", "must not be empty")
	}
	return s.open(ctx, name, req, false, runID, false)
}

// open is Start, Resume and StartAs; continuable marks the first
// activation of a continuable child (see subagent.Scope).
func (s *Service) open(ctx context.Context, name string, req subagent.StartRequest, resume bool, runID string, continuable bool) (subagent.Run, error) {
	if ctx == nil {
		return nil, subagent.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.Cancelled(err)
	}
	if isNil(req.Parent) {
		return nil, invalid("parent", "a delegating parent agent is required")
	}
	parentID := req.Parent.SessionID()
	// Not bounded by ctx: the registry answers at once, and a reference it
	// handed out must reach the parent actor.
	r, err := s.call(context.Background(), s.pid, &prepare{name: name, parentID: parentID})
	if err != nil {
		return nil, err
	}
	prep := r.(*prepare)
	p, ref := prep.p, prep.ref
	if p == nil {
		return nil, fmt.Errorf("%w: %q", subagent.ErrNoProvider, name)
	}
	st := &started{sink: sink{s: s}}
	if ref != nil {
		st.owner, st.listening = ref.pid, &ref.listening
	}
	if err := cmp.Or(validate(p, req, resume), rules.ParentClosed(req.Parent)); err != nil {
		st.tell(&local.Discarded{}) // the reference, unused
		return nil, err
	}
	if runID == "" {
		runID = ids.New()
	}
	if otelx.On() {
		ctx = st.trace(ctx, p, name, req, resume)
	}
	ctx = st.bind(ctx, req.Parent)
	// The parent actor holds the run's progress until Published, so every
	// event of the run follows its start (E1, E6). Nobody listening, no
	// progress is sent at all.
	if st.listens() {
		st.tell(&local.Expect{RunID: runID})
	}
	discard := func(err error) (subagent.Run, error) {
		st.tell(&local.Discarded{RunID: runID})
		st.unbind()
		otelx.EndFailed(st.span, otelx.Ended{RunID: runID, ParentSession: parentID, Depth: subagent.DelegationDepthOf(req.Parent) + 1}, err)
		return nil, err
	}
	scope := subagent.Scope{
		RunID:       runID,
		Parent:      subagent.ParentRef{SessionID: parentID, Depth: subagent.DelegationDepthOf(req.Parent)},
		Restarts:    s.opts.RunRestarts,
		Continuable: continuable,
		Cancel:      st.cancel,
	}
	if st.owner != nil {
		scope.Events = &st.sink
	}
	var run subagent.Run
	if resume {
		run, err = p.(subagent.Resumer).Resume(ctx, scope, req)
	} else {
		run, err = p.Start(ctx, scope, req)
	}
	switch {
	case err != nil:
		return discard(contextual(ctx, err))
	case isNil(run):
		return discard(&providerError{provider: name, reason: "returned neither a run nor an error"})
	case resume:
		// A resumed child that took its log carries the request's prompt
		// in it: it is published, and an ended ctx or parent settles it
		// aborted (it is tied to both).
	case ctx.Err() != nil || rules.ParentClosed(req.Parent) != nil:
		// Ended before publication: no published child may escape.
		_ = run.Dispose(context.Background())
		return discard(cmp.Or(rules.ParentClosed(req.Parent), contextual(ctx, nil)))
	case s.closing.Load():
		_ = run.Dispose(context.Background())
		return discard(subagent.ErrServiceClosed)
	}
	// Published is enqueued before the observer can send Settled, so start
	// precedes end even for a child that had already settled (E1). local
	// comes from the provider's exact agent (E2).
	if st.owner != nil {
		st.published = local.Published{RunID: runID, Provider: name, SessionID: run.SessionID(), Local: !isNil(run.LocalAgent()), Task: taskOf(req.Prompt)}
		st.tell(&st.published)
	}
	if otelx.Active() {
		st.observe(ctx, name, run, otelx.Ended{RunID: runID, ParentSession: parentID, Depth: subagent.DelegationDepthOf(req.Parent) + 1})
	}
	return st.wrap(run, runID), nil
}

// trace starts the run's span (invoke_agent, O1, O2) under ctx's, which
// is the delegating tool call's when a delegate tool starts the run, and
// returns ctx carrying it for the provider: the child's own spans (its
// model and tool calls, an ACP agent's _meta) descend from it.
func (st *started) trace(ctx context.Context, p subagent.Provider, name string, req subagent.StartRequest, resume bool) context.Context {
	oop, ok := p.(otelx.OutOfProcess)
	r := otelx.Run{
		Provider:      name,
		Client:        ok && oop.OutOfProcess(),
		ModelProvider: req.Options.ModelProvider,
		Model:         req.Options.Model,
	}
	if resume && req.Continuation != nil {
		r.ResumedFrom = req.Continuation.SessionID
	}
	ctx, st.span = otelx.StartRun(ctx, r)
	return ctx
}

// observe records a published run on its span and in the run metrics,
// and has its end recorded when it settles, with what e says of it.
func (st *started) observe(ctx context.Context, name string, run subagent.Run, e otelx.Ended) {
	otelx.Published(st.span)
	e.SessionID, e.Published, e.Local = run.SessionID(), true, !isNil(run.LocalAgent())
	counted := otelx.Metering()
	if counted {
		otelx.RunStarted(ctx, name)
	}
	run.OnSettled(func(res subagent.Result, err error) {
		otelx.EndRun(st.span, e, res, err)
		if counted {
			reason := res.StopReason
			if err != nil {
				reason = subagent.Error
			}
			otelx.RunEnded(context.WithoutCancel(ctx), name, reason)
		}
	})
}

// bind ties ctx to the Service's life and to the parent's when the parent
// can close: a parent that closes cancels its children, during setup or
// after (ErrParentClosed), and so does closing the Service. This context
// is the one tie between a child and what it lives under. unbind
// releases it once the run is disposed or its start failed. The provider
// gets its cancel too (Scope.Cancel): a child that is its run's
// only activation runs under this context itself.
func (st *started) bind(ctx context.Context, p subagent.Agent) context.Context {
	ctx, st.cancel = context.WithCancelCause(ctx)
	if !st.s.live.add(st) {
		st.cancel(subagent.ErrServiceClosed)
	}
	if c, ok := p.(subagent.Closable); ok && !rules.IsWithin(ctx, c) {
		life := c.Lifetime()
		st.stopParent = context.AfterFunc(life, func() { st.cancel(context.Cause(life)) })
	}
	return ctx
}

// unbind releases the tie bind made; once.
func (st *started) unbind() {
	if st.unbound.CompareAndSwap(false, true) {
		st.s.live.remove(st)
		if st.stopParent != nil {
			st.stopParent()
		}
		st.cancel(context.Canceled)
	}
}

// sink forwards a run's progress to its parent actor while anyone listens
// there. A run started while nobody had subscribed to its parent has no
// parent actor (owner nil) and emits nothing.
type sink struct {
	s         *Service
	owner     *actor.PID
	listening *atomic.Int32
}

func (k *sink) Emit(ev subagent.RunProgress) {
	if k.listens() {
		k.tell(&local.Progress{Event: ev})
	}
}

// listens reports whether the parent actor has listeners now.
func (k *sink) listens() bool { return k.owner != nil && k.listening.Load() > 0 }

// tell sends msg to the parent actor, if the run has one.
func (k *sink) tell(msg any) {
	if k.owner != nil {
		k.s.sys.Root.Send(k.owner, msg)
	}
}

// serviceRun is a provider's run as the Service returns it: its id is the
// one the Service minted, observers run off the run's goroutines, and its
// tie to the parent's lifetime is released once disposed.
type serviceRun struct {
	subagent.Run
	id string
	st *started // whose tie to the parent Dispose releases
}

func (r *serviceRun) Dispose(ctx context.Context) error {
	if err := r.Run.Dispose(ctx); err != nil {
		return err
	}
	r.st.unbind()
	return nil
}

func (r *serviceRun) ID() string { return r.id }

func (r *serviceRun) OnSettled(f func(subagent.Result, error)) {
	r.Run.OnSettled(func(res subagent.Result, err error) { go f(res, err) })
}

// steerableRun is a serviceRun whose provider's run can be steered.
type steerableRun struct {
	serviceRun
	steerer subagent.Steerer
}

func (r *steerableRun) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	err := r.steerer.Steer(ctx, message)
	if err != nil && r.st.span != nil {
		// An admitted steer is recorded by the agent that took it.
		otelx.SteerRefused(r.st.span)
	}
	return err
}

// started is what the Service keeps of one run: the sink its provider
// emits to, the run as its caller gets it, its Published, which the parent
// actor keeps while the run is live, and its tie to the Service's and the
// parent's lifetimes (see bind).
type started struct {
	sink
	run       steerableRun // its steerer nil when the provider's run cannot steer
	published local.Published
	// The tie (see bind): the run context's cancel, the parent's watch
	// that calls it, and the run's links in its Service's list.
	cancel     context.CancelCauseFunc
	stopParent func() bool
	prev, next *started
	unbound    atomic.Bool
	// span is the run's span, nil while tracing is off (O4).
	span trace.Span
}

// wrap makes run the caller's and has its end told to its parent actor.
func (st *started) wrap(run subagent.Run, id string) subagent.Run {
	st.run.serviceRun = serviceRun{Run: run, id: id, st: st}
	if st.owner != nil {
		run.OnSettled(st.settled)
	}
	if steerer, ok := run.(subagent.Steerer); ok {
		st.run.steerer = steerer
		return &st.run
	}
	return &st.run.serviceRun
}

func (st *started) settled(res subagent.Result, err error) {
	st.tell(&local.Settled{RunID: st.run.id, Result: res, Err: err})
}

// isNil reports a nil interface or one holding a nil pointer, map, slice,
// func or channel: a typed nil passes == nil but is no value to call.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// contextual reports an error as what ended ctx, when it has ended: the
// parent closing, or a cancellation.
func contextual(ctx context.Context, err error) error {
	cerr := ctx.Err()
	switch cause := context.Cause(ctx); {
	case cerr == nil:
		return err
	case errors.Is(cause, subagent.ErrParentClosed):
		return errors.Join(cause, err)
	case errors.Is(err, subagent.ErrCancelled):
		return err
	}
	return errors.Join(subagent.Cancelled(cerr), err)
}

// taskRunes is the most runes of a prompt's first line RunStarted.Task
// keeps.
const taskRunes = 60

// taskOf is RunStarted.Task for prompt: its first line, cut at taskRunes
// runes, in a string of its own (a live run's start keeps it, not the
// prompt).
func taskOf(prompt []subagent.ContentBlock) string {
	line, _, _ := strings.Cut(strings.TrimSpace(subagent.TextOf(prompt)), "\n")
	if utf8.RuneCountInString(line) > taskRunes {
		line = string([]rune(line)[:taskRunes-1]) + "…"
	}
	return strings.Clone(line)
}
