package subactor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// waitFor answers once the history holds every one of want (as user
// messages), calling a no-op tool meanwhile so that steers can join; with
// none it answers at once. It answers with the user messages it saw.
type waitFor struct{ want []string }

func (m waitFor) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	var seen []string
	for _, msg := range req.Messages {
		if msg.Role == agent.User {
			seen = append(seen, subagent.TextOf(msg.Content))
		}
	}
	for _, w := range m.want {
		if !slicesContains(seen, w) {
			if err := ctx.Err(); err != nil {
				return agent.Response{}, err
			}
			return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: fmt.Sprint(len(req.Messages)), Name: "noop", Args: json.RawMessage(`{}`)}}}}, nil
		}
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(strings.Join(seen, ","))}}}, nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

type noop struct{}

func (noop) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (noop) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) { return "ok", nil }

type continuableEnv struct {
	rt       *subactor.Runtime
	mgr      *tasks.Manager
	parent   *agent.Agent
	provider string // spawns children that loop until they have what they wait for
}

func newContinuable(t *testing.T, model agent.Model) continuableEnv {
	sys := actors.NewSystem()
	store := persistence.NewMemory()
	mgr := tasks.New(sys, store)
	rt, err := subactor.New(subactor.Config{System: sys, Store: store, Model: model, Tools: []agent.Tool{noop{}},
		Options: []registry.Option{registry.WithTasks(mgr)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
		defer cancel()
		_ = mgr.Close(ctx)
		rt.Close()
		sys.Shutdown()
	})
	parent, err := rt.NewAgent(testkit.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	patient, err := spawn.New(spawn.Config{Name: "patient", System: sys, Store: store, Model: model, Tools: []agent.Tool{noop{}}, MaxSteps: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	release, err := rt.Service.RegisterProvider(patient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return continuableEnv{rt: rt, mgr: mgr, parent: parent, provider: "patient"}
}

func (e continuableEnv) collect(t *testing.T, id string) tasks.Task {
	t.Helper()
	task, err := e.mgr.Collect(testkit.Ctx(t), "parent", id, testkit.Deadline)
	if err != nil || task.State == tasks.Running {
		t.Fatalf("task %s: %+v, %v", id, task, err)
	}
	return task
}

func text(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }

// Contract S7: a continuable child gets a durable id, its session (with
// its descriptor) under that id, and its first activation as a background
// task; without a task manager it is a typed error.
func TestS7_StartContinuableRunsTheFirstActivationAsATask(t *testing.T) {
	bare, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	p, _ := bare.NewAgent(testkit.Ctx(t), "p")
	if _, err := bare.Service.StartContinuable(testkit.Ctx(t), bare.Provider.Name(), subagent.StartRequest{Parent: p, Prompt: text("x")}); !errors.Is(err, registry.ErrNoTasks) {
		t.Fatalf("without a task manager: %v", err)
	}

	e := newContinuable(t, waitFor{})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	if c.ChildID == "" || c.Task.SessionID != c.ChildID {
		t.Fatalf("continuable %+v", c)
	}
	done := e.collect(t, c.Task.ID)
	if done.State != tasks.Completed || subagent.TextOf(done.Result.Output) != "first" {
		t.Fatalf("first activation %+v", done)
	}
	_, recs, err := e.rt.Store.Load(testkit.Ctx(t), c.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := descriptor.Fold(recs); err != nil || d.Provider != e.provider {
		t.Fatalf("descriptor %+v, %v", d, err)
	}
}

// Contract S8: a follow-up to an idle child starts a new activation that
// resumes it from its log with the message; one to a live child steers it.
func TestS8_FollowUpsStartWhenIdleAndSteerWhenLive(t *testing.T) {
	e := newContinuable(t, waitFor{want: []string{"first", "second", "third"}})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	// Live: the first activation waits for the other two messages.
	d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("second"), "user")
	if err != nil || d.Route != registry.Steered {
		t.Fatalf("follow-up to a live child: %+v, %v", d, err)
	}
	d, err = e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("third"), "user")
	if err != nil || d.Route != registry.Steered {
		t.Fatalf("second follow-up to a live child: %+v, %v", d, err)
	}
	if done := e.collect(t, c.Task.ID); subagent.TextOf(done.Result.Output) != "first,second,third" {
		t.Fatalf("first activation %+v", done)
	}
	// Idle: a follow-up starts a new activation resumed from the log.
	d, err = e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("fourth"), "user")
	if err != nil || d.Route != registry.Started || d.Task.SessionID != c.ChildID {
		t.Fatalf("follow-up to an idle child: %+v, %v", d, err)
	}
	if done := e.collect(t, d.Task.ID); subagent.TextOf(done.Result.Output) != "first,second,third,fourth" {
		t.Fatalf("resumed activation %+v", done)
	}
}

// Contract S8: concurrent follow-ups to an idle child make one activation:
// one starts it, the others steer it.
func TestS8_ConcurrentFollowUpsMakeOneActivation(t *testing.T) {
	const n = 4
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("m", i))
	}
	e := newContinuable(t, waitFor{want: want})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	// The first activation waits for the follow-ups too: kill it (maybe
	// before it logged its prompt), so that they find the child idle.
	if _, err := e.mgr.Kill(testkit.Ctx(t), "parent", c.Task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mgr.Await(testkit.Ctx(t), "parent", c.Task.ID); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	routes := map[registry.Route]int{}
	var started []tasks.Task
	var wg sync.WaitGroup
	for _, m := range want {
		wg.Go(func() {
			d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text(m), "user")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			routes[d.Route]++
			if d.Route == registry.Started {
				started = append(started, d.Task)
			}
		})
	}
	wg.Wait()
	if routes[registry.Started] != 1 || routes[registry.Steered] != n-1 {
		t.Fatalf("routes %v, want one start and %d steers", routes, n-1)
	}
	if done := e.collect(t, started[0].ID); done.State != tasks.Completed {
		t.Fatalf("the one activation %+v", done)
	}
}

// Contract S8: when the caller's context ends while a live delivery waits
// for admission, the shared activation is cancelled, and the call returns
// only once it has quiesced.
func TestS8_ACancelledDeliveryCancelsTheActivation(t *testing.T) {
	child := &blockingChild{entered: make(chan struct{}, 1)}
	e := newContinuable(t, child)
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	// The child is in its model call: a steer now waits for a next request
	// that never comes.
	testkit.Recv(t, child.entered, "the child's model call")
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := e.rt.Service.SendMessage(ctx, e.parent, c.ChildID, text("late"), "user"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a delivery whose context ended: %v", err)
	}
	if !child.returned.Load() {
		t.Fatal("the call returned before the activation's child had stopped")
	}
	if done := e.collect(t, c.Task.ID); done.Result.StopReason != subagent.Aborted {
		t.Fatalf("the cancelled activation %+v", done)
	}
}

// blockingChild waits in its model call until cancelled: a steer is never
// admitted. returned says the call has ended.
type blockingChild struct {
	entered  chan struct{}
	returned atomic.Bool
}

func (b *blockingChild) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	b.returned.Store(true)
	return agent.Response{}, context.Cause(ctx)
}
