package run_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// bodyProvider is a provider whose runs are run actors: body is a
// child's first activation, again its continuation from the last
// checkpoint after a restart (none when nil).
type bodyProvider struct {
	sys         *actors.System
	body, again run.Body
}

func (p bodyProvider) Name() string                        { return "bodies" }
func (p bodyProvider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (p bodyProvider) InheritsParentContext() bool         { return false }
func (p bodyProvider) Start(ctx context.Context, scope subagent.Scope, _ subagent.StartRequest) (subagent.Run, error) {
	return run.Start(p.sys, run.Spec{Scope: scope, Ctx: ctx, Body: p.body, Relaunch: p.again}), nil
}

// steerable is a body that completes with the first steer it takes, or
// aborts when cancelled. returned is set as it returns.
func steerable(returned *atomic.Bool) run.Body {
	return func(ctx context.Context, g run.Gate) (subagent.Result, error) {
		defer returned.Store(true)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			steers, err := g.Take(ctx)
			if err != nil {
				return subagent.Result{StopReason: subagent.Aborted, Detail: err.Error()}, nil
			}
			if len(steers) > 0 {
				return subagent.Result{Output: steers[0], StopReason: subagent.Completed}, nil
			}
			select {
			case <-ctx.Done():
				return subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled"}, nil
			case <-tick.C:
			}
		}
	}
}

func panics(context.Context, run.Gate) (subagent.Result, error) { panic("bug") }

// panicsOnCue is a body that panics once the test closes its channel,
// after the embedder's Watch has reached the run.
func panicsOnCue() (run.Body, chan struct{}) {
	return failsOnCue(func() (subagent.Result, error) { panic("bug") })
}

// failsOnCue is a body that ends as fail says once the test closes its
// channel, or aborts when cancelled before.
func failsOnCue(fail func() (subagent.Result, error)) (run.Body, chan struct{}) {
	cue := make(chan struct{})
	return func(ctx context.Context, _ run.Gate) (subagent.Result, error) {
		select {
		case <-cue:
			return fail()
		case <-ctx.Done():
			return subagent.Result{StopReason: subagent.Aborted}, nil
		}
	}, cue
}

// do is a step a test has an embedder's actor carry out in its Receive.
type do func(c actor.Context)

// embedder is a platform's supervisor actor: it carries out the test's
// steps and hands the test everything else it receives.
type embedder struct {
	pid     *actor.PID
	seen    chan any
	root    *actor.RootContext
	skipped []any // Terminated messages next passed over
}

// newEmbedder spawns an embedder under root whose children are
// supervised with strategy.
func newEmbedder(t *testing.T, root *actor.RootContext, strategy actor.SupervisorStrategy) *embedder {
	e := &embedder{seen: make(chan any, 64), root: root}
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message(); m.(type) {
		case do:
			m.(do)(c)
		case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		default:
			e.seen <- m
		}
	}, actor.WithSupervisor(strategy))
	e.pid = root.Spawn(props)
	t.Cleanup(func() { _ = root.StopFuture(e.pid).Wait() })
	return e
}

// spawn has the embedder spawn a run through p, watch it both ways
// (protoactor's Watch and the run's own), and returns its PID.
func (e *embedder) spawn(t *testing.T, p subagent.Provider) *actor.PID {
	t.Helper()
	pids := make(chan *actor.PID, 1)
	errs := make(chan error, 1)
	e.root.Send(e.pid, do(func(c actor.Context) {
		pid, err := run.Spawn(context.Background(), c, p, subagent.StartRequest{Prompt: text("work")})
		if err != nil {
			errs <- err
			return
		}
		c.Watch(pid)
		c.Request(pid, &messages.Watch{})
		pids <- pid
	}))
	select {
	case pid := <-pids:
		return pid
	case err := <-errs:
		t.Fatalf("spawn: %v", err)
	case <-testkit.Ctx(t).Done():
		t.Fatal("waited for the embedder to spawn a run")
	}
	return nil
}

// tell has the embedder send msg to pid as itself, so answers come back.
func (e *embedder) tell(pid *actor.PID, msg any) {
	e.root.Send(e.pid, do(func(c actor.Context) { c.Request(pid, msg) }))
}

// next returns what the embedder received next that satisfies ok,
// skipping the rest.
func next[T any](t *testing.T, e *embedder, what string, ok func(T) bool) T {
	t.Helper()
	ctx := testkit.Ctx(t)
	for {
		select {
		case m := <-e.seen:
			if v, is := m.(T); is && ok(v) {
				return v
			}
			if _, is := m.(*actor.Terminated); is {
				e.skipped = append(e.skipped, m)
			}
		case <-ctx.Done():
			t.Fatalf("waited for %s", what)
		}
	}
}

func any_[T any](T) bool { return true }

// terminated waits for protoactor's Terminated of pid, which a parent
// may receive before or after the run's own messages: among what next
// passed over, then in what comes next.
func terminated(t *testing.T, e *embedder, pid *actor.PID) {
	t.Helper()
	for i, m := range e.skipped {
		if m, ok := m.(*actor.Terminated); ok && m.Who.Equal(pid) {
			e.skipped = append(e.skipped[:i], e.skipped[i+1:]...)
			return
		}
	}
	next(t, e, "Terminated", func(m *actor.Terminated) bool { return m.Who.Equal(pid) })
}

// Contract A3: a platform's actor spawns a run as its own child (its PID
// under the actor's), commands it by message and watches it: a steer is
// answered admitted and becomes the child's answer (RunSettled), a
// Cancel settles a second run aborted, and a Dispose is answered with
// RunQuiesced and ends in protoactor's Terminated, by which time the
// child's goroutine has returned.
func TestA3_SpawnUnderAnActorCommandsByMessageAndWatch(t *testing.T) {
	sys := newSystem(t)
	e := newEmbedder(t, sys.ActorSystem().Root, actor.DefaultSupervisorStrategy())
	var returned, returned2 atomic.Bool
	pid := e.spawn(t, bodyProvider{sys: sys, body: steerable(&returned)})
	if !strings.HasPrefix(pid.Id, e.pid.Id+"/run-") {
		t.Fatalf("run %s is not a child of the embedder %s", pid.Id, e.pid.Id)
	}

	e.tell(pid, &messages.Steer{SteerId: 7, Content: []*messages.ContentBlock{{Type: "text", Text: "change course"}}})
	if a := next(t, e, "the steer's answer", any_[*messages.SteerAnswer]); a.SteerId != 7 || !a.Admitted {
		t.Fatalf("steer answered %+v", a)
	}
	s := next(t, e, "the run's settle", any_[*messages.RunSettled])
	if s.Error != "" || s.Result.StopReason != string(subagent.Completed) || s.Result.Output[0].Text != "change course" {
		t.Fatalf("settled %+v", s)
	}

	other := e.spawn(t, bodyProvider{sys: sys, body: steerable(&returned2)})
	e.tell(other, &messages.Cancel{Reason: "enough"})
	if s := next(t, e, "the cancelled run's settle", any_[*messages.RunSettled]); s.Result.StopReason != string(subagent.Aborted) {
		t.Fatalf("cancelled run settled %+v", s)
	}

	for _, p := range []*actor.PID{pid, other} {
		e.tell(p, &messages.Dispose{})
		next(t, e, "the run's quiescence", func(q *messages.RunQuiesced) bool { return true })
		terminated(t, e, p)
	}
	if !returned.Load() || !returned2.Load() {
		t.Fatal("Terminated came before the child's goroutine returned")
	}
}

// settleOfCrash waits for a run's settle and checks it is an error
// caused by the child's panic.
func settleOfCrash(t *testing.T, e *embedder) {
	t.Helper()
	s := next(t, e, "the crashed run's settle", any_[*messages.RunSettled])
	if s.Result.StopReason != string(subagent.Error) || !strings.Contains(s.Result.Detail, "child panicked: bug") {
		t.Fatalf("crashed run settled %+v", s)
	}
}

// decide is a strategy whose decider answers every failure with d.
func decide(d actor.Directive) actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(3, time.Hour, func(any) actor.Directive { return d })
}

// Contract A3: a run whose child panics escalates the crash to its
// parent actor, and the parent's SupervisorStrategy decides: Restart
// relaunches it from its checkpoint, Stop settles it error with the crash
// as its cause, Resume settles a dead child's run error, and Escalate
// passes the failure up, whose restart of the embedder stops the run.
func TestA3_SupervisorDirectives(t *testing.T) {
	t.Run("restart", func(t *testing.T) { restartedFromCheckpoint(t, panicsOnCue) })
	t.Run("stop", func(t *testing.T) {
		sys := newSystem(t)
		e := newEmbedder(t, sys.ActorSystem().Root, decide(actor.StopDirective))
		body, cue := panicsOnCue()
		pid := e.spawn(t, bodyProvider{sys: sys, body: body, again: again})
		close(cue)
		settleOfCrash(t, e)
		terminated(t, e, pid)
	})
	t.Run("resume", func(t *testing.T) {
		sys := newSystem(t)
		e := newEmbedder(t, sys.ActorSystem().Root, decide(actor.ResumeDirective))
		body, cue := panicsOnCue()
		e.spawn(t, bodyProvider{sys: sys, body: body, again: again})
		close(cue)
		settleOfCrash(t, e)
	})
	t.Run("escalate", func(t *testing.T) {
		sys := newSystem(t)
		var reasons atomic.Value
		up := &recording{reasons: &reasons, then: actor.DefaultSupervisorStrategy()}
		e := newEmbedder(t, actor.NewRootContext(sys.ActorSystem(), nil).WithGuardian(up), decide(actor.EscalateDirective))
		body, cue := panicsOnCue()
		e.spawn(t, bodyProvider{sys: sys, body: body, again: again})
		close(cue)
		settleOfCrash(t, e)
		var crash *run.CrashError
		if r, _ := reasons.Load().(error); !errors.As(r, &crash) {
			t.Fatalf("the embedder's supervisor was handed %v, want the run's crash", reasons.Load())
		}
	})
	t.Run("restart window exhausted", func(t *testing.T) {
		sys := newSystem(t)
		e := newEmbedder(t, sys.ActorSystem().Root, actor.NewOneForOneStrategy(2, time.Hour, actor.DefaultDecider))
		body, cue := panicsOnCue()
		e.spawn(t, bodyProvider{sys: sys, body: body, again: panics})
		close(cue)
		settleOfCrash(t, e)
	})
}

// again is a relaunched body: it completes with "again".
func again(context.Context, run.Gate) (subagent.Result, error) {
	return subagent.Result{Output: text("again"), StopReason: subagent.Completed}, nil
}

// restartedFromCheckpoint checks that a run whose body crashes on cue
// (crashes makes it) is relaunched by its embedder's Restart directive
// and settles as the relaunched body.
func restartedFromCheckpoint(t *testing.T, crashes func() (run.Body, chan struct{})) {
	t.Helper()
	sys := newSystem(t)
	e := newEmbedder(t, sys.ActorSystem().Root, decide(actor.RestartDirective))
	body, cue := crashes()
	e.spawn(t, bodyProvider{sys: sys, body: body, again: again})
	close(cue)
	if s := next(t, e, "the restarted run's settle", any_[*messages.RunSettled]); s.Result.StopReason != string(subagent.Completed) || s.Result.Output[0].Text != "again" {
		t.Fatalf("restarted run settled %+v", s)
	}
}

// recording is a supervisor strategy that keeps the reason of the last
// failure it handled and then applies then.
type recording struct {
	reasons *atomic.Value
	then    actor.SupervisorStrategy
}

func (r *recording) HandleFailure(sys *actor.ActorSystem, s actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	if err, ok := reason.(error); ok {
		r.reasons.Store(err)
	}
	r.then.HandleFailure(sys, s, child, rs, reason, msg)
}

// Contract A3: a body that ends with an error matching *run.CrashError
// (a child running elsewhere that was lost) has crashed, as one that
// panics: its supervisor's Restart relaunches it from its checkpoint, and
// Stop settles it error with the crash as its cause.
func TestA3_ABodyEndingInACrashErrorIsACrash(t *testing.T) {
	lostOnCue := func() (run.Body, chan struct{}) {
		return failsOnCue(func() (subagent.Result, error) {
			return subagent.Result{}, fmt.Errorf("the child's node: %w", &run.CrashError{Reason: "node lost"})
		})
	}
	t.Run("restart", func(t *testing.T) { restartedFromCheckpoint(t, lostOnCue) })
	t.Run("stop", func(t *testing.T) {
		sys := newSystem(t)
		e := newEmbedder(t, sys.ActorSystem().Root, decide(actor.StopDirective))
		body, cue := lostOnCue()
		e.spawn(t, bodyProvider{sys: sys, body: body, again: again})
		close(cue)
		if s := next(t, e, "the stopped run's settle", any_[*messages.RunSettled]); s.Result.StopReason != string(subagent.Error) || !strings.Contains(s.Result.Detail, "node lost") {
			t.Fatalf("stopped run settled %+v", s)
		}
	})
}

// relay is a child that stands for one running elsewhere: it takes its
// steers itself (the message "refuse" it refuses) and completes once the
// test closes done.
type relay struct {
	got  chan string
	done chan struct{}
}

func (c *relay) Run(g run.Gate) {
	select {
	case <-c.done:
		g.Exit().Result = subagent.Result{StopReason: subagent.Completed}
	case <-g.Context().Done():
		g.Exit().Result = subagent.Result{StopReason: subagent.Aborted}
	}
}

func (c *relay) Steer(_ context.Context, m []subagent.ContentBlock) error {
	if subagent.TextOf(m) == "refuse" {
		return errors.New("the child elsewhere refused it")
	}
	c.got <- subagent.TextOf(m)
	return nil
}

// Contract R4, A3: a Child that is a subagent.Steerer takes the run's
// steers itself: each reaches its Steer as it comes, and its answer is
// the steer's (a refusal is ErrNotDelivered with its reason).
func TestR4_A3_ASteererChildTakesItsSteersItself(t *testing.T) {
	sys := newSystem(t)
	c := &relay{got: make(chan string, 1), done: make(chan struct{})}
	h := run.Start(sys, run.Spec{Child: c, Relaunchable: false})
	if err := h.Steer(testkit.Ctx(t), text("go on")); err != nil {
		t.Fatalf("steer: %v", err)
	}
	if got := testkit.Recv(t, c.got, "the steer at the child"); got != "go on" {
		t.Fatalf("the child took %q", got)
	}
	if err := h.Steer(testkit.Ctx(t), text("refuse")); !errors.Is(err, subagent.ErrNotDelivered) || !strings.Contains(err.Error(), "refused it") {
		t.Fatalf("a steer the child refuses: %v", err)
	}
	close(c.done)
	if res, err := h.Wait(testkit.Ctx(t)); err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("result %+v, %v", res, err)
	}
	if err := h.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}
