// Package tasks is the task manager: background delegations run as tasks
// that their parent can look at, collect with a wait limit and kill (T3),
// whatever the provider. A task's record goes to a persistence.TaskStore
// when the manager has one, so that a listing survives the process: a
// task that was running in a process that ended reads Interrupted.
//
// The manager is an actor: its mailbox orders a task's start, settle,
// kills and waits (a pure per-task lifecycle decides). Nothing blocking
// runs inside it: runs are started, disposed and recorded on the callers'
// goroutines and on the run's settle observer.
//
// The order of a task's life: its record exists before any provider code
// runs (if it cannot be recorded, no child starts); its outcome is decided
// and recorded only after its run was disposed; a kill answers at once
// (the task reads Stopping until its run settled).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/actors/internal/reply"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Errors of the task manager, matched with errors.Is.
var (
	// ErrNoTask means no task with that id belongs to the asking parent
	// (another parent's task is not revealed).
	ErrNoTask = errors.New("tasks: no such task")
	// ErrClosed means the manager was closed.
	ErrClosed = errors.New("tasks: manager closed")
)

// interruptedDetail is the Err of a task read back from the store that
// was running when its process ended.
const interruptedDetail = "the process running the task ended before it settled"

// Task is a background delegation as its parent sees it.
type Task struct {
	ID              string
	ParentSessionID string
	Provider        string
	RunID           string // the run's one id, as in its events
	SessionID       string // the child's session
	// Continuable marks an activation of a continuable child.
	Continuable bool
	State       State
	// Result is the run's result once it settled (without output unless
	// it completed); Err an infrastructure fault, a failed start or a
	// Dispose error.
	Result *subagent.Result
	Err    string
}

// Spec is what Start needs besides the start itself.
type Spec struct {
	// Parent is the delegating parent's session id; required.
	Parent   string
	Provider string
	// ChildID is the child's session id when it is known before its run
	// exists (a continuable child's durable id).
	ChildID string
	// Continuable marks an activation of a continuable child; its record
	// says so, which is how a parent's children are known after a restart.
	Continuable bool
	// Recorded, when set, is told of the task once it is recorded, before
	// any provider code runs.
	Recorded func(Task)
	// Settled, when set, is called once the run settled, before it is
	// disposed; Ended once the task is terminal and recorded. Both on a
	// goroutine of their own; neither for a start that failed (Ended is).
	Settled func()
	Ended   func(Task)
}

// Manager runs background tasks. It is safe for concurrent use.
type Manager struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	log    *slog.Logger
	store  persistence.TaskStore // nil: tasks live in memory only
	closed chan struct{}
	once   sync.Once
	waits  atomic.Uint64 // names the waits on a task
}

// New starts a manager on sys; store may be nil.
func New(sys *actors.System, store persistence.TaskStore) *Manager {
	m := &Manager{sys: sys.ActorSystem(), log: sys.ActorSystem().Logger(), store: store, closed: make(chan struct{})}
	a := &managerActor{log: m.log, tasks: map[string]*entry{}, waits: map[string]*reply.To{}}
	m.pid = m.sys.Root.SpawnPrefix(inline.Props(func() actor.Actor { return a }), "subagent-tasks-")
	return m
}

// Start records a task of spec.Parent and then starts its run with start
// (the caller's Service.Start, say), handing it a context that a kill or
// Close cancels while the start is pending and that ctx's end cancels too;
// the run then lives until it settles or is killed, so start should not
// tie it to anything else. A ctx that already ended starts nothing. When
// the task cannot be recorded no child starts and the error is returned;
// when the start fails the task ends Failed (Killed if cancelled) and the
// start's error is returned.
func (m *Manager) Start(ctx context.Context, spec Spec, start func(context.Context) (subagent.Run, error)) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	t := Task{ID: ids.New(), ParentSessionID: spec.Parent, Provider: spec.Provider, SessionID: spec.ChildID,
		Continuable: spec.Continuable, State: Running}
	startCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })()
	// Not bounded by ctx: the actor answers at once, and a task it added
	// must be started (and so settled), or Close waits for it in vain.
	if _, err := m.call(context.WithoutCancel(ctx), &add{task: t, cancel: cancel}); err != nil {
		return Task{}, err
	}
	if err := m.record(ctx, t); err != nil {
		m.sys.Root.Send(m.pid, drop{id: t.ID})
		return Task{}, err
	}
	if spec.Recorded != nil {
		spec.Recorded(t)
	}
	run, err := start(startCtx)
	if err != nil {
		in := inSettled{err: err.Error()}
		if cause := context.Cause(startCtx); cause != nil {
			in = inSettled{result: subagent.Result{StopReason: subagent.Aborted, Detail: cause.Error()}}
		}
		m.finish(t.ID, in, spec.Ended)
		return Task{}, err
	}
	t.RunID = run.ID()
	// A continuable child keeps its id: a run on another node has no
	// session here, though the child's log is its session there.
	if s := run.SessionID(); s != "" || spec.ChildID == "" {
		t.SessionID = s
	}
	r, err := m.call(context.WithoutCancel(ctx), &attach{id: t.ID, run: run, runID: t.RunID, sessionID: t.SessionID})
	if err != nil {
		return Task{}, errors.Join(err, run.Dispose(context.WithoutCancel(ctx)))
	}
	if r.(bool) { // killed meanwhile: the observer settles it
		go m.dispose(t.ID, run)
	}
	run.OnSettled(func(res subagent.Result, err error) {
		if spec.Settled != nil {
			spec.Settled()
		}
		in := inSettled{result: res}
		// The outcome is decided once the run is gone.
		if err = errors.Join(err, run.Dispose(context.Background())); err != nil {
			in.err = err.Error()
		}
		m.finish(t.ID, in, spec.Ended)
	})
	if spec.ChildID == "" {
		// Learned with the run: a one-shot child's session is its run's.
		if err := m.record(context.WithoutCancel(ctx), t); err != nil {
			m.log.Warn("subagent: recording a background task's child", "task", t.ID, "err", err)
		}
	}
	return t, nil
}

// finish settles task id with in, records its final state and tells
// ended.
func (m *Manager) finish(id string, in inSettled, ended func(Task)) {
	r, err := m.call(context.Background(), &settle{id: id, in: in})
	if err != nil {
		return // closed: Close waited for every task, so not this one's
	}
	final := r.(Task)
	if err := m.record(context.Background(), final); err != nil {
		m.log.Warn("subagent: recording a settled background task", "task", id, "err", err)
	}
	m.sys.Root.Send(m.pid, recorded{id: id})
	if ended != nil {
		ended(final)
	}
}

// dispose disposes a killed task's run; its observer settles the task.
func (m *Manager) dispose(id string, run subagent.Run) {
	if err := run.Dispose(context.Background()); err != nil {
		m.log.Warn("subagent: disposing a killed task's run", "task", id, "err", err)
	}
}

// Get returns the task as it stands: from memory, or from the store when
// this manager did not run it (a task of an earlier process).
func (m *Manager) Get(ctx context.Context, parentSessionID, id string) (Task, error) {
	r, err := m.call(ctx, &get{parent: parentSessionID, id: id})
	if err != nil {
		return Task{}, err
	}
	if t, ok := r.(Task); ok {
		return t, nil
	}
	if m.store != nil {
		rec, err := m.store.GetTask(ctx, id)
		switch {
		case err == nil && rec.ParentSessionID == parentSessionID:
			return fromRecord(rec)
		case err != nil && !errors.Is(err, persistence.ErrNotFound):
			return Task{}, err
		}
	}
	return Task{}, fmt.Errorf("%w: %q", ErrNoTask, id)
}

// Collect waits up to wait for the task to settle (and be recorded) and
// returns it as it then stands (still Running or Stopping if it did not).
// wait must be positive; Get reads a task without waiting.
func (m *Manager) Collect(ctx context.Context, parentSessionID, id string, wait time.Duration) (Task, error) {
	if wait <= 0 {
		return Task{}, fmt.Errorf("tasks: a collect's wait must be positive, not %v", wait)
	}
	limited, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return m.await(limited, ctx, parentSessionID, id) // settled, timed out or gone: Get tells which
}

// Await waits until the task is terminal and recorded and returns it, or
// fails with ctx's error.
func (m *Manager) Await(ctx context.Context, parentSessionID, id string) (Task, error) {
	return m.await(ctx, ctx, parentSessionID, id)
}

// await waits until the task has settled, until ends or the manager is
// gone, and then returns the task as Get does, or fails with ctx's error.
func (m *Manager) await(until, ctx context.Context, parentSessionID, id string) (Task, error) {
	w := &wait{parent: parentSessionID, id: id, key: strconv.FormatUint(m.waits.Add(1), 10)}
	m.sys.Root.Send(m.pid, w)
	if _, err := w.Wait(until, m.closed); err != nil {
		m.sys.Root.Send(m.pid, unwait{parent: parentSessionID, id: id, key: w.key})
	}
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	return m.Get(ctx, parentSessionID, id)
}

// Kill stops a task and answers at once: its pending start is cancelled
// or its run disposed, and the task reads Stopping until it settled
// (then Killed). Killing a settled task changes nothing.
func (m *Manager) Kill(ctx context.Context, parentSessionID, id string) (Task, error) {
	r, err := m.call(ctx, &kill{parent: parentSessionID, id: id})
	if err != nil {
		return Task{}, err
	}
	k := r.(killed)
	if k.run != nil {
		go m.dispose(id, k.run)
	}
	return k.task, nil
}

// List returns a parent's tasks, oldest first: those of this manager, and
// those of earlier processes in its store.
func (m *Manager) List(ctx context.Context, parentSessionID string) ([]Task, error) {
	r, err := m.call(ctx, &list{parent: parentSessionID})
	if err != nil {
		return nil, err
	}
	live := r.([]Task)
	if m.store == nil {
		return live, nil
	}
	recs, err := m.store.ListTasks(ctx, parentSessionID)
	if err != nil {
		return nil, err
	}
	mine := make(map[string]bool, len(live))
	for _, t := range live {
		mine[t.ID] = true
	}
	var earlier []persistence.TaskRecord
	for _, rec := range recs {
		if !mine[rec.ID] {
			earlier = append(earlier, rec)
		}
	}
	slices.SortStableFunc(earlier, func(x, y persistence.TaskRecord) int { return x.UpdatedAt.Compare(y.UpdatedAt) })
	out := make([]Task, 0, len(earlier)+len(live))
	for _, rec := range earlier {
		t, err := fromRecord(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return append(out, live...), nil
}

// Continuable reports whether childID is a continuable child of
// parentSessionID, and its provider: one of the parent's tasks, in this
// manager or its store, is an activation of it (S8's ownership).
func (m *Manager) Continuable(ctx context.Context, parentSessionID, childID string) (provider string, ok bool, err error) {
	list, err := m.List(ctx, parentSessionID)
	if err != nil {
		return "", false, err
	}
	for _, t := range list {
		if t.Continuable && t.SessionID == childID {
			return t.Provider, true, nil
		}
	}
	return "", false, nil
}

// Close kills every task still running (a pending start is cancelled),
// waits until every task is terminal and recorded (a killed one as
// killed), and stops the manager; a Start after it fails with ErrClosed
// before any provider code runs. ctx bounds the wait. Idempotent.
func (m *Manager) Close(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		var r any
		if r, err = m.call(ctx, &drain{}); err == nil {
			runs := r.([]subagent.Run)
			var wg sync.WaitGroup
			errs := make([]error, len(runs))
			for i, run := range runs {
				wg.Go(func() { errs[i] = run.Dispose(ctx) })
			}
			wg.Wait()
			err = errors.Join(errs...)
			_, qerr := m.call(ctx, &quiet{})
			err = errors.Join(err, qerr)
		}
		_ = m.sys.Root.PoisonFuture(m.pid).Wait()
		close(m.closed)
	})
	return err
}

func (m *Manager) call(ctx context.Context, cmd interface {
	Wait(context.Context, <-chan struct{}) (any, error)
}) (any, error) {
	m.sys.Root.Send(m.pid, cmd)
	r, err := cmd.Wait(ctx, m.closed)
	if errors.Is(err, reply.ErrGone) {
		return nil, ErrClosed
	}
	return r, err
}

// taskResult is a task record's Result.
type taskResult struct {
	subagent.Result
	Err string `json:"err,omitempty"`
}

// record writes t to the task store, if any.
func (m *Manager) record(ctx context.Context, t Task) error {
	if m.store == nil {
		return nil
	}
	rec := persistence.TaskRecord{ID: t.ID, ParentSessionID: t.ParentSessionID, ChildSessionID: t.SessionID,
		Provider: t.Provider, Continuable: t.Continuable, State: string(t.State), UpdatedAt: time.Now()}
	if t.Result != nil {
		data, err := json.Marshal(taskResult{*t.Result, t.Err})
		if err != nil {
			return err
		}
		rec.Result = data
	}
	return m.store.PutTask(ctx, rec)
}

// fromRecord is a stored task as its parent sees it: one that was still
// running reads Interrupted, since no process runs it now.
func fromRecord(rec persistence.TaskRecord) (Task, error) {
	t := Task{ID: rec.ID, ParentSessionID: rec.ParentSessionID, Provider: rec.Provider, SessionID: rec.ChildSessionID,
		Continuable: rec.Continuable, State: State(rec.State)}
	if len(rec.Result) > 0 {
		var r taskResult
		if err := json.Unmarshal(rec.Result, &r); err != nil {
			return Task{}, &persistence.CorruptError{TaskID: rec.ID, Part: "task", Err: err}
		}
		t.Result, t.Err = &r.Result, r.Err
	}
	if !t.State.Terminal() {
		t.State, t.Err = Interrupted, interruptedDetail
	}
	return t, nil
}

// Commands to the manager actor: local Go values.
type (
	add struct {
		reply.To
		task   Task
		cancel context.CancelCauseFunc
	}
	drop   struct{ id string }
	attach struct {
		reply.To
		id, runID, sessionID string
		run                  subagent.Run
	}
	settle struct {
		reply.To
		id string
		in inSettled
	}
	recorded struct{ id string }
	get      struct {
		reply.To
		parent, id string
	}
	list struct {
		reply.To
		parent string
	}
	kill struct {
		reply.To
		parent, id string
	}
	// killed answers a kill: the task as it now stands, and the run to
	// dispose when there is one.
	killed struct {
		task Task
		run  subagent.Run
	}
	// wait is answered once the task has settled; key names it for
	// unwait, when its caller stops waiting first.
	wait struct {
		reply.To
		parent, id, key string
	}
	unwait struct{ parent, id, key string }
	drain  struct{ reply.To }
	// quiet is answered once every task is terminal and recorded.
	quiet struct{ reply.To }
)

type entry struct {
	task     Task
	run      subagent.Run
	cancel   context.CancelCauseFunc // the pending start's
	life     *lifecycle
	recorded bool     // terminal and in the store
	held     []string // waits released by the settle, answered once recorded
	seq      int      // creation order
}

type managerActor struct {
	log     *slog.Logger
	tasks   map[string]*entry
	waits   map[string]*reply.To
	next    int
	closing bool
	quiets  []*reply.To
}

func (a *managerActor) Receive(c actor.Context) {
	msg := c.Message()
	defer a.crashed(msg)
	guard.Enter("tasks", msg)
	a.receive(msg)
}

// crashed recovers a panic in place (A2): the command being handled is
// answered with the crash.
func (a *managerActor) crashed(msg any) {
	if p := recover(); p != nil {
		a.log.Error("subagent: task manager crashed", "message", fmt.Sprintf("%T", msg), "panic", p)
		if f, ok := msg.(guard.Failer); ok {
			f.Fail(fmt.Errorf("tasks: manager crashed handling %T: %v", msg, p))
		}
	}
}

// errKilledByClose is the cause a Close gives the starts it cancels.
var errKilledByClose = errors.New("tasks: the manager closed")

func (a *managerActor) receive(msg any) {
	switch m := msg.(type) {
	case *add:
		if a.closing {
			m.Fail(ErrClosed)
			return
		}
		a.next++
		a.tasks[m.task.ID] = &entry{task: m.task, cancel: m.cancel, life: newLifecycle(), seq: a.next}
		m.Answer(struct{}{})
	case drop:
		delete(a.tasks, m.id)
		a.quieted()
	case *attach:
		e := a.tasks[m.id]
		e.run, e.task.RunID, e.task.SessionID = m.run, m.runID, m.sessionID
		m.Answer(len(e.life.step(inAttached{})) > 0)
	case *settle:
		e := a.tasks[m.id]
		a.carry(e, e.life.step(m.in))
		e.run, e.cancel = nil, nil // the run is gone; nothing here holds it
		m.Answer(e.view())
	case recorded:
		if e := a.tasks[m.id]; e != nil {
			e.recorded = true
			a.answer(e.held)
			e.held = nil
		}
		a.quieted()
	case *get:
		if e := a.mine(m.parent, m.id); e != nil {
			m.Answer(e.view())
		} else {
			m.Answer(nil) // the store may know it
		}
	case *list:
		var out []*entry
		for _, e := range a.tasks {
			if e.task.ParentSessionID == m.parent {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(x, y *entry) int { return x.seq - y.seq })
		tasks := make([]Task, len(out))
		for i, e := range out {
			tasks[i] = e.view()
		}
		m.Answer(tasks)
	case *kill:
		e := a.mine(m.parent, m.id)
		if e == nil {
			m.Fail(fmt.Errorf("%w: %q", ErrNoTask, m.id))
			return
		}
		m.Answer(killed{run: a.kill(e, context.Canceled), task: e.view()})
	case *wait:
		e := a.mine(m.parent, m.id)
		if e == nil {
			m.Answer(struct{}{}) // Get then reports the missing task
			return
		}
		a.waits[m.key] = &m.To
		a.carry(e, e.life.step(inWait{id: m.key}))
	case unwait:
		delete(a.waits, m.key)
		if e := a.mine(m.parent, m.id); e != nil {
			e.life.step(inUnwait{id: m.key})
		}
	case *drain:
		a.closing = true
		var runs []subagent.Run
		for _, e := range a.tasks {
			if run := a.kill(e, errKilledByClose); run != nil {
				runs = append(runs, run)
			}
		}
		m.Answer(runs)
	case *quiet:
		a.quiets = append(a.quiets, &m.To)
		a.quieted()
	}
}

// kill steps e's lifecycle with a kill: a pending start is cancelled
// here, a run to dispose is returned.
func (a *managerActor) kill(e *entry, cause error) subagent.Run {
	var run subagent.Run
	for _, f := range e.life.step(inKill{}) {
		switch f.(type) {
		case dispose:
			run = e.run
		case cancelStart:
			e.cancel(cause)
		}
	}
	return run
}

// carry answers the waiters a lifecycle step released (the task is
// terminal, its run disposed) once the task is recorded, so that a
// waiter reads the store as it stands too.
func (a *managerActor) carry(e *entry, fx []effect) {
	var ids []string
	for _, f := range fx {
		if ans, ok := f.(answer); ok {
			ids = append(ids, ans.id)
		}
	}
	if e.recorded {
		a.answer(ids)
	} else {
		e.held = append(e.held, ids...)
	}
}

// answer answers the waits ids still waiting.
func (a *managerActor) answer(ids []string) {
	for _, id := range ids {
		if to, ok := a.waits[id]; ok {
			delete(a.waits, id)
			to.Answer(struct{}{})
		}
	}
}

// quieted answers the quiet waiters once every task is recorded.
func (a *managerActor) quieted() {
	if len(a.quiets) == 0 {
		return
	}
	for _, e := range a.tasks {
		if !e.recorded {
			return
		}
	}
	for _, q := range a.quiets {
		q.Answer(struct{}{})
	}
	a.quiets = nil
}

// mine is the task id of parent, or nil.
func (a *managerActor) mine(parent, id string) *entry {
	if e := a.tasks[id]; e != nil && e.task.ParentSessionID == parent {
		return e
	}
	return nil
}

// view is the task as its parent sees it now.
func (e *entry) view() Task {
	t := e.task
	t.State = e.life.state
	if t.State.Terminal() {
		res := e.life.result
		t.Result, t.Err = &res, e.life.err
	}
	return t
}
