// Package tasks is the task manager: background delegations run as tasks
// that their parent can look at, collect with a wait limit and kill (T3),
// whatever the provider. A task's record goes to a persistence.TaskStore
// when the manager has one, so that a listing survives the process.
//
// The manager is an actor: its mailbox orders a task's settle, kills and
// waits (a pure per-task lifecycle decides). Nothing blocking runs inside
// it: runs are started, disposed and recorded on the callers' goroutines
// and on the run's settle observer, which the Service runs on a goroutine
// of its own.
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
	"github.com/subactor/subactor/internal/ids"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/actors/internal/inline"
	"github.com/subactor/subactor/actors/internal/reply"
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

// Task is a background delegation as its parent sees it.
type Task struct {
	ID              string
	ParentSessionID string
	Provider        string
	RunID           string // the run's one id, as in its events
	SessionID       string // the child's session
	State           State
	// Result is the run's result once it settled; Err an infrastructure
	// fault the result could not represent.
	Result *subagent.Result
	Err    string
}

// Manager runs background tasks. It is safe for concurrent use.
type Manager struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	log    *slog.Logger
	store  persistence.TaskStore // nil: tasks live in memory only
	closed chan struct{}
	once   sync.Once
	waits  atomic.Uint64 // names Collect's waits
	// settling counts the settle observers still to record their task.
	settling sync.WaitGroup
}

// New starts a manager on sys; store may be nil.
func New(sys *actors.System, store persistence.TaskStore) *Manager {
	m := &Manager{sys: sys.ActorSystem(), log: sys.Logger(), store: store, closed: make(chan struct{})}
	a := &managerActor{log: m.log, tasks: map[string]*entry{}, waits: map[string]*reply.To{}}
	m.pid = m.sys.Root.SpawnPrefix(inline.Props(func() actor.Actor { return a }), "subagent-tasks-")
	return m
}

// Start starts a run with start (the caller's Service.Start, say) and
// makes it a background task of parentSessionID. The run lives until it
// settles or is killed: start should not tie it to a context that ends
// with the call that asked for it. When the task cannot be recorded the
// run is disposed and the error returned.
func (m *Manager) Start(ctx context.Context, parentSessionID, provider string, start func(context.Context) (subagent.Run, error)) (Task, error) {
	run, err := start(ctx)
	if err != nil {
		return Task{}, err
	}
	t := Task{ID: ids.New(), ParentSessionID: parentSessionID, Provider: provider,
		RunID: run.ID(), SessionID: run.SessionID(), State: Running}
	if err := m.record(ctx, t); err != nil {
		return Task{}, errors.Join(err, run.Dispose(context.WithoutCancel(ctx)))
	}
	if _, err := m.call(ctx, &add{task: t, run: run}); err != nil {
		return Task{}, errors.Join(err, run.Dispose(context.WithoutCancel(ctx)))
	}
	m.settling.Add(1)
	run.OnSettled(func(res subagent.Result, err error) {
		defer m.settling.Done()
		done := settled{id: t.ID, result: res}
		if err != nil {
			done.err = err.Error()
		}
		m.sys.Root.Send(m.pid, done)
		// The run is done: its resources go now, not when someone asks.
		if derr := run.Dispose(context.Background()); derr != nil {
			m.log.Warn("subagent: disposing a background task's run", "task", t.ID, "err", derr)
		}
		if final, err := m.Get(context.Background(), parentSessionID, t.ID); err == nil {
			if err := m.record(context.Background(), final); err != nil {
				m.log.Warn("subagent: recording a settled background task", "task", t.ID, "err", err)
			}
		}
	})
	return t, nil
}

// Get returns the task as it stands.
func (m *Manager) Get(ctx context.Context, parentSessionID, id string) (Task, error) {
	r, err := m.call(ctx, &get{parent: parentSessionID, id: id})
	if err != nil {
		return Task{}, err
	}
	return r.(Task), nil
}

// Collect waits up to wait for the task to settle and returns it as it
// then stands (still Running if it did not).
func (m *Manager) Collect(ctx context.Context, parentSessionID, id string, wait time.Duration) (Task, error) {
	if wait > 0 {
		limited, cancel := context.WithTimeout(ctx, wait)
		m.settle(limited, parentSessionID, id) // settled, timed out or gone: Get tells which
		cancel()
		if err := ctx.Err(); err != nil {
			return Task{}, err
		}
	}
	return m.Get(ctx, parentSessionID, id)
}

// settle waits until the task has settled, ctx ends or the manager is
// gone.
func (m *Manager) settle(ctx context.Context, parentSessionID, id string) {
	w := &await{parent: parentSessionID, id: id, key: strconv.FormatUint(m.waits.Add(1), 10)}
	m.sys.Root.Send(m.pid, w)
	if _, err := w.Wait(ctx, m.closed); err != nil {
		m.sys.Root.Send(m.pid, unwait{parent: parentSessionID, id: id, key: w.key})
	}
}

// Kill stops a running task: its run is disposed and the task ends
// Killed. Killing a settled task changes nothing.
func (m *Manager) Kill(ctx context.Context, parentSessionID, id string) (Task, error) {
	r, err := m.call(ctx, &kill{parent: parentSessionID, id: id})
	if err != nil {
		return Task{}, err
	}
	if run, ok := r.(subagent.Run); ok {
		if err := run.Dispose(ctx); err != nil {
			return Task{}, err
		}
		// The settle reaches the manager from the run's observer.
		m.settle(ctx, parentSessionID, id)
	}
	return m.Get(ctx, parentSessionID, id)
}

// List returns a parent's tasks, oldest first.
func (m *Manager) List(ctx context.Context, parentSessionID string) ([]Task, error) {
	r, err := m.call(ctx, &list{parent: parentSessionID})
	if err != nil {
		return nil, err
	}
	return r.([]Task), nil
}

// Close kills every running task, waits until their runs are disposed and
// every task is recorded (a killed one as killed), and stops the manager.
// Idempotent.
func (m *Manager) Close(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		var runs any
		if runs, err = m.call(ctx, &drain{}); err == nil {
			for _, run := range runs.([]subagent.Run) {
				err = errors.Join(err, run.Dispose(ctx))
			}
		}
		// Every settle observer records its task before the actor goes,
		// so a task killed here is stored as killed.
		recorded := make(chan struct{})
		go func() { m.settling.Wait(); close(recorded) }()
		select {
		case <-recorded:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
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

// record writes t to the task store, if any.
func (m *Manager) record(ctx context.Context, t Task) error {
	if m.store == nil {
		return nil
	}
	rec := persistence.TaskRecord{ID: t.ID, ParentSessionID: t.ParentSessionID, ChildSessionID: t.SessionID,
		Provider: t.Provider, State: string(t.State), UpdatedAt: time.Now()}
	if t.Result != nil {
		data, err := json.Marshal(struct {
			subagent.Result
			Err string `json:"err,omitempty"`
		}{*t.Result, t.Err})
		if err != nil {
			return err
		}
		rec.Result = data
	}
	return m.store.PutTask(ctx, rec)
}

// Commands to the manager actor: local Go values.
type (
	add struct {
		reply.To
		task Task
		run  subagent.Run
	}
	settled struct {
		id     string
		result subagent.Result
		err    string
	}
	get struct {
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
	// await is answered once the task has settled; key names it for
	// unwait, when its caller stops waiting first.
	await struct {
		reply.To
		parent, id, key string
	}
	unwait struct{ parent, id, key string }
	drain  struct{ reply.To }
)

type entry struct {
	task Task
	run  subagent.Run
	life *lifecycle
	seq  int // creation order
}

type managerActor struct {
	log   *slog.Logger
	tasks map[string]*entry
	waits map[string]*reply.To
	next  int
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

func (a *managerActor) receive(msg any) {
	switch m := msg.(type) {
	case *add:
		a.next++
		a.tasks[m.task.ID] = &entry{task: m.task, run: m.run, life: newLifecycle(), seq: a.next}
		m.Answer(struct{}{})
	case settled:
		if e := a.tasks[m.id]; e != nil {
			a.carry(e, e.life.step(inSettled{result: m.result, err: m.err}))
		}
	case *get:
		if e := a.mine(m.parent, m.id); e != nil {
			m.Answer(e.view())
		} else {
			m.Fail(fmt.Errorf("%w: %q", ErrNoTask, m.id))
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
		var run subagent.Run
		for _, f := range e.life.step(inKill{}) {
			if _, ok := f.(dispose); ok {
				run = e.run
			}
		}
		m.Answer(run)
	case *await:
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
		var runs []subagent.Run
		for _, e := range a.tasks {
			for _, f := range e.life.step(inKill{}) {
				if _, ok := f.(dispose); ok {
					runs = append(runs, e.run)
				}
			}
		}
		m.Answer(runs)
	}
}

// carry answers the waiters a lifecycle step released.
func (a *managerActor) carry(e *entry, fx []effect) {
	for _, f := range fx {
		if ans, ok := f.(answer); ok {
			if to, ok := a.waits[ans.id]; ok {
				delete(a.waits, ans.id)
				to.Answer(struct{}{})
			}
		}
	}
	if e.life.state != Running {
		e.run = nil // settled: the observer disposes it; nothing here holds it
	}
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
	if t.State != Running {
		res := e.life.result
		t.Result, t.Err = &res, e.life.err
	}
	return t
}
