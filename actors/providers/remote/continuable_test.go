package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// recall answers with every user message it saw, joined by commas, once
// the last one is not "hold"; while it is, it calls a no-op tool, so that
// a steer can join the next request.
type recall struct{}

func (recall) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	var seen []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			seen = append(seen, subagent.TextOf(m.Content))
		}
	}
	if len(seen) > 0 && seen[len(seen)-1] == "hold" {
		if err := ctx.Err(); err != nil {
			return agent.Response{}, err
		}
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: fmt.Sprint(len(req.Messages)), Name: "noop", Args: json.RawMessage(`{}`)}}}}, nil
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(strings.Join(seen, ","))}}}, nil
}

type noop struct{}

func (noop) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (noop) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) { return "ok", nil }

// continuables is a Service running continuable children of provider
// "worker" through the cluster, on a node whose worker is a spawn
// provider keeping its children in hostStore.
func continuables(t *testing.T, hostStore persistence.Store) (*registry.Service, *tasks.Manager, subagent.Provider) {
	t.Helper()
	sys := actors.NewSystem() // the node's Stop shuts it down
	worker, err := spawn.New(spawn.Config{Name: "worker", System: sys, Store: hostStore, Model: recall{}, Tools: []agent.Tool{noop{}}, MaxSteps: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	n := clustertest.Node(t, cluster.Config{System: sys}, worker)
	p, err := remote.New(remote.Config{Name: "worker", Node: n})
	if err != nil {
		t.Fatal(err)
	}
	mgr := tasks.New(sys, persistence.NewMemory())
	svc := registry.New(sys, registry.WithTasks(mgr))
	t.Cleanup(func() {
		svc.Close()
		_ = mgr.Close(context.Background())
	})
	if _, err := svc.RegisterProvider(p); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitMembers(testkit.Ctx(t), func(ms []cluster.Member) bool { return len(ms) == 1 }); err != nil {
		t.Fatal(err)
	}
	return svc, mgr, p
}

func collect(t *testing.T, mgr *tasks.Manager, id string) tasks.Task {
	t.Helper()
	task, err := mgr.Collect(testkit.Ctx(t), "parent", id, testkit.Deadline)
	if err != nil || task.State == tasks.Running {
		t.Fatalf("task %s: %+v, %v", id, task, err)
	}
	return task
}

// Contracts S7, S8, K1: a continuable child on a member is a whole child:
// its first activation is stored on the host under its child id before
// it runs; a follow-up to the idle child resumes it there from its log
// (a new activation, a new task, seeing its earlier turns), and one to a
// live activation is steered into it across the wire.
func TestS8_K1_ContinuableChildOnAMemberTakesFollowUps(t *testing.T) {
	hostStore := persistence.NewMemory()
	svc, mgr, _ := continuables(t, hostStore)
	c, err := svc.StartContinuable(testkit.Ctx(t), "worker", subagent.StartRequest{Parent: parent{}, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	if done := collect(t, mgr, c.Task.ID); done.State != tasks.Completed || subagent.TextOf(done.Result.Output) != "first" {
		t.Fatalf("first activation %+v", done)
	}
	if _, err := hostStore.Header(testkit.Ctx(t), c.ChildID); err != nil {
		t.Fatalf("the child's session %s on the host: %v", c.ChildID, err)
	}

	d, err := svc.SendMessage(testkit.Ctx(t), parent{}, c.ChildID, text("second"), "user")
	if err != nil || d.Route != registry.Started || d.Task.ID == c.Task.ID {
		t.Fatalf("follow-up to the idle child: %+v, %v; want a new activation", d, err)
	}
	if done := collect(t, mgr, d.Task.ID); subagent.TextOf(done.Result.Output) != "first,second" {
		t.Fatalf("resumed activation %+v, want its earlier turns", done)
	}

	held, err := svc.SendMessage(testkit.Ctx(t), parent{}, c.ChildID, text("hold"), "user")
	if err != nil || held.Route != registry.Started {
		t.Fatalf("follow-up to the idle child: %+v, %v", held, err)
	}
	if d, err := svc.SendMessage(testkit.Ctx(t), parent{}, c.ChildID, text("third"), "user"); err != nil || d.Route != registry.Steered {
		t.Fatalf("follow-up to the live activation: %+v, %v; want it steered", d, err)
	}
	if done := collect(t, mgr, held.Task.ID); subagent.TextOf(done.Result.Output) != "first,second,hold,third" {
		t.Fatalf("steered activation %+v", done)
	}
}

// Contracts S8, K2: resuming a child no member holds the log of (a store
// per node, its node gone) fails typed, ErrNoMember and
// persistence.ErrNotFound, naming the member that refused it.
func TestS8_K2_ResumeWithoutTheLogFailsTyped(t *testing.T) {
	_, _, p := continuables(t, persistence.NewMemory())
	_, err := p.(subagent.Resumer).Resume(testkit.Ctx(t), subagent.Scope{}, subagent.StartRequest{
		Parent: parent{}, Prompt: text("again"), Continuation: &subagent.Continuation{SessionID: "gone"}})
	if !errors.Is(err, remote.ErrNoMember) || !errors.Is(err, persistence.ErrNotFound) || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("resume of an unknown child: %v, want ErrNoMember and ErrNotFound", err)
	}
}

func text(s string) []subagent.ContentBlock { return []subagent.ContentBlock{subagent.Text(s)} }
