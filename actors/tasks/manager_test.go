package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"

	"go.uber.org/goleak"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// gated answers once released, or aborts when its context ends.
type gated struct{ release chan struct{} }

func (g gated) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	select {
	case <-g.release:
		return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("done: " + subagent.TextOf(req.Messages[0].Content))}}}, nil
	case <-ctx.Done():
		return agent.Response{}, context.Cause(ctx)
	}
}

type env struct {
	rt      *subactor.Runtime
	store   persistence.Backend
	mgr     *tasks.Manager
	parent  *agent.Agent
	release chan struct{}
}

func newEnv(t *testing.T) *env {
	store := persistence.NewMemory()
	release := make(chan struct{})
	rt, err := subactor.New(subactor.Config{Store: store, Model: gated{release}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := tasks.New(rt.System, store)
	t.Cleanup(func() {
		// t's own context has ended by now.
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
		defer cancel()
		if err := mgr.Close(ctx); err != nil {
			t.Error(err)
		}
		rt.Close()
	})
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	return &env{rt: rt, store: store, mgr: mgr, parent: parent, release: release}
}

func (e *env) start(t *testing.T, prompt string) tasks.Task {
	t.Helper()
	task, err := e.mgr.Start(testkit.Ctx(t), tasks.Spec{Parent: e.parent.SessionID(), Provider: "spawn"}, func(start context.Context) (subagent.Run, error) {
		// The task's context: a background run outlives the call.
		return e.rt.Service.Start(start, e.rt.Provider.Name(), subagent.StartRequest{
			Parent: e.parent, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// Contract T3: a background task's status, collected with a wait limit:
// running while its child works, completed with its output once it
// finished, and recorded in the task store.
func TestT3_StatusAndCollectWithAWaitLimit(t *testing.T) {
	e := newEnv(t)
	task := e.start(t, "survey")
	if task.State != tasks.Running || task.RunID == "" || task.SessionID == "" {
		t.Fatalf("started task %+v", task)
	}
	got, err := e.mgr.Collect(testkit.Ctx(t), "parent", task.ID, time.Millisecond)
	if err != nil || got.State != tasks.Running || got.Result != nil {
		t.Fatalf("collect while running: %+v, %v", got, err)
	}
	close(e.release)
	got, err = e.mgr.Collect(testkit.Ctx(t), "parent", task.ID, testkit.Deadline)
	if err != nil || got.State != tasks.Completed || subagent.TextOf(got.Result.Output) != "done: survey" {
		t.Fatalf("collected %+v, %v", got, err)
	}
	// Collected once recorded: the store says so too.
	if rec, err := e.store.GetTask(testkit.Ctx(t), task.ID); err != nil || rec.State != string(tasks.Completed) || rec.ChildSessionID != task.SessionID {
		t.Fatalf("task record %+v, %v", rec, err)
	}
	if list, err := e.mgr.List(testkit.Ctx(t), "parent"); err != nil || len(list) != 1 || list[0].ID != task.ID {
		t.Fatalf("list %+v, %v", list, err)
	}
}

// Contract T3: killing a running task answers at once (the task reads
// stopping), cancels and disposes its child; the task ends killed, and
// killing it again changes nothing.
func TestT3_KillStopsTheChild(t *testing.T) {
	e := newEnv(t)
	task := e.start(t, "forever")
	live := testkit.LiveActors(e.rt.System)
	got, err := e.mgr.Kill(testkit.Ctx(t), "parent", task.ID)
	if err != nil || got.State != tasks.Stopping {
		t.Fatalf("task as the kill answers %+v, %v", got, err)
	}
	got, err = e.mgr.Await(testkit.Ctx(t), "parent", task.ID)
	if err != nil || got.State != tasks.Killed || got.Result == nil || got.Result.StopReason != subagent.Aborted || got.Result.Output != nil {
		t.Fatalf("killed task %+v, %v", got, err)
	}
	if n := testkit.LiveActors(e.rt.System); n >= live {
		t.Fatalf("live actors %d after the kill, %d before: the run was not disposed", n, live)
	}
	if again, err := e.mgr.Kill(testkit.Ctx(t), "parent", task.ID); err != nil || again.State != tasks.Killed {
		t.Fatalf("second kill: %+v, %v", again, err)
	}
}

// Contract T3: a parent sees only its own tasks.
func TestT3_AnotherParentsTaskIsNotThere(t *testing.T) {
	e := newEnv(t)
	task := e.start(t, "mine")
	for _, err := range []error{
		func() error { _, err := e.mgr.Get(testkit.Ctx(t), "intruder", task.ID); return err }(),
		func() error { _, err := e.mgr.Kill(testkit.Ctx(t), "intruder", task.ID); return err }(),
		func() error {
			_, err := e.mgr.Collect(testkit.Ctx(t), "intruder", task.ID, time.Millisecond)
			return err
		}(),
	} {
		if !errors.Is(err, tasks.ErrNoTask) {
			t.Fatalf("another parent's access: %v", err)
		}
	}
	if got, _ := e.mgr.Get(testkit.Ctx(t), "parent", task.ID); got.State != tasks.Running {
		t.Fatalf("the owner's task %+v", got)
	}
}

// Contract T3: closing the manager kills its running tasks and records
// them as killed before it stops.
func TestT3_CloseKillsAndRecordsRunningTasks(t *testing.T) {
	e := newEnv(t)
	task := e.start(t, "forever")
	if err := e.mgr.Close(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	rec, err := e.store.GetTask(testkit.Ctx(t), task.ID)
	if err != nil || rec.State != string(tasks.Killed) {
		t.Fatalf("task record after Close: %+v, %v", rec, err)
	}
	if _, err := e.mgr.Get(testkit.Ctx(t), "parent", task.ID); !errors.Is(err, tasks.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// Contract T3 (issue 16, fault 6): Close racing a background start kills
// it: a start pending when Close drains is cancelled and its task
// recorded killed before Close returns, and a Start after Close fails
// with ErrClosed without running any provider code.
func TestT3_CloseKillsAStartInProgressAndRefusesLaterStarts(t *testing.T) {
	e := newEnv(t)
	entered := make(chan struct{})
	type started struct {
		task tasks.Task
		err  error
	}
	out := make(chan started, 1)
	go func() {
		task, err := e.mgr.Start(testkit.Ctx(t), tasks.Spec{Parent: "parent", Provider: "spawn"}, func(start context.Context) (subagent.Run, error) {
			close(entered)
			<-start.Done() // the provider's start, cancelled by Close
			return e.rt.Service.Start(start, e.rt.Provider.Name(), subagent.StartRequest{
				Parent: e.parent, Prompt: []subagent.ContentBlock{subagent.Text("late")}})
		})
		out <- started{task, err}
	}()
	testkit.Recv(t, entered, "the start")
	if err := e.mgr.Close(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	// The task is recorded killed before Close returns (below); the
	// Start call itself returns its error just after (its last step,
	// after the record, runs on its own goroutine).
	recs, err := e.store.ListTasks(testkit.Ctx(t), "parent")
	if err != nil || len(recs) != 1 || recs[0].State != string(tasks.Killed) {
		t.Fatalf("task records after Close: %+v, %v", recs, err)
	}
	if got := testkit.Recv(t, out, "the return of the start Close cancelled"); got.err == nil {
		t.Fatalf("a start cancelled by Close returned %+v", got.task)
	}
	called := false
	if _, err := e.mgr.Start(testkit.Ctx(t), tasks.Spec{Parent: "parent"}, func(context.Context) (subagent.Run, error) {
		called = true
		return nil, errors.New("unreachable")
	}); !errors.Is(err, tasks.ErrClosed) || called {
		t.Fatalf("Start after Close: %v (start called: %v)", err, called)
	}
}

// Contract T3 (issue 16): after a restart the manager lists the tasks of
// its store; one that was running when its process ended reads
// interrupted, never running.
func TestT3_ATaskOfAnEndedProcessReadsInterrupted(t *testing.T) {
	e := newEnv(t)
	if err := e.store.PutTask(testkit.Ctx(t), persistence.TaskRecord{ID: "old", ParentSessionID: "parent", ChildSessionID: "child",
		Provider: "spawn", Continuable: true, State: string(tasks.Running), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	list, err := e.mgr.List(testkit.Ctx(t), "parent")
	if err != nil || len(list) != 1 || list[0].State != tasks.Interrupted || list[0].Err == "" || !list[0].Continuable {
		t.Fatalf("list %+v, %v", list, err)
	}
	if got, err := e.mgr.Get(testkit.Ctx(t), "parent", "old"); err != nil || got.State != tasks.Interrupted {
		t.Fatalf("get %+v, %v", got, err)
	}
	if _, err := e.mgr.Get(testkit.Ctx(t), "intruder", "old"); !errors.Is(err, tasks.ErrNoTask) {
		t.Fatalf("another parent's stored task: %v", err)
	}
	if provider, ok, err := e.mgr.Continuable(testkit.Ctx(t), "parent", "child"); err != nil || !ok || provider != "spawn" {
		t.Fatalf("Continuable: %q, %v, %v", provider, ok, err)
	}
}

// Contract T3 (issue 16, task before child): a start whose context ended
// already starts nothing (no provider code, no record); a start that
// fails after its task was recorded settles it failed with the error as
// detail; a kill while the start is pending settles it killed, with no
// output and the kill's cancellation cause as detail, and publishes no
// child.
func TestT3_AFailedOrKilledStartSettlesItsTask(t *testing.T) {
	e := newEnv(t)
	t.Run("context ended before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testkit.Ctx(t))
		cancel()
		called := false
		if _, err := e.mgr.Start(ctx, tasks.Spec{Parent: "early"}, func(context.Context) (subagent.Run, error) {
			called = true
			return nil, errors.New("unreachable")
		}); !errors.Is(err, context.Canceled) || called {
			t.Fatalf("Start with an ended context: %v (start called: %v)", err, called)
		}
		if recs, err := e.store.ListTasks(testkit.Ctx(t), "early"); err != nil || len(recs) != 0 {
			t.Fatalf("task records %+v, %v: want none", recs, err)
		}
	})
	t.Run("start fails", func(t *testing.T) {
		var id string
		boom := errors.New("the provider could not start")
		if _, err := e.mgr.Start(testkit.Ctx(t), tasks.Spec{Parent: "failing", Recorded: func(task tasks.Task) { id = task.ID }},
			func(context.Context) (subagent.Run, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("Start: %v, want the start's error", err)
		}
		got, err := e.mgr.Await(testkit.Ctx(t), "failing", id)
		if err != nil || got.State != tasks.Failed || got.Err != boom.Error() {
			t.Fatalf("the failed start's task %+v, %v: want failed with the error", got, err)
		}
		if rec, err := e.store.GetTask(testkit.Ctx(t), id); err != nil || rec.State != string(tasks.Failed) {
			t.Fatalf("task record %+v, %v", rec, err)
		}
	})
	t.Run("killed while starting", func(t *testing.T) {
		recorded := make(chan string, 1)
		entered := make(chan struct{})
		out := make(chan error, 1)
		go func() {
			_, err := e.mgr.Start(testkit.Ctx(t), tasks.Spec{Parent: "killing", Recorded: func(task tasks.Task) { recorded <- task.ID }},
				func(start context.Context) (subagent.Run, error) {
					close(entered)
					<-start.Done() // the provider's start, cancelled by the kill
					return nil, context.Cause(start)
				})
			out <- err
		}()
		id := testkit.Recv(t, recorded, "the task's record")
		testkit.Recv(t, entered, "the start")
		if got, err := e.mgr.Kill(testkit.Ctx(t), "killing", id); err != nil || got.State != tasks.Stopping {
			t.Fatalf("the kill answered %+v, %v: want stopping", got, err)
		}
		if err := testkit.Recv(t, out, "Start after the kill"); err == nil {
			t.Fatal("a start killed while pending published its child")
		}
		got, err := e.mgr.Await(testkit.Ctx(t), "killing", id)
		if err != nil || got.State != tasks.Killed || got.Result == nil || got.Result.Output != nil ||
			got.Result.Detail != context.Canceled.Error() || got.RunID != "" {
			t.Fatalf("the task killed while starting %+v, %v: want killed, the kill's cause as detail, no run", got, err)
		}
	})
}
