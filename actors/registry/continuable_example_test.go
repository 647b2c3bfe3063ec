package registry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// lastWords is a model that answers with the last user message it sees
// and how many it has seen.
type lastWords struct{}

func (lastWords) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	var seen []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			seen = append(seen, subagent.TextOf(m.Content))
		}
	}
	answer := fmt.Sprintf("%s (%d messages)", seen[len(seen)-1], len(seen))
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(answer)}}}, nil
}

// A continuable child: started once with a durable id, then followed up.
// The follow-up finds it idle, so it is resumed from its log with its
// earlier turn.
func ExampleService_StartContinuable() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	store := persistence.NewMemory() // sessions and task records
	mgr := tasks.New(sys, store)
	defer mgr.Close(ctx)
	svc := registry.New(sys, registry.WithTasks(mgr))
	defer svc.Close()
	p, err := spawn.New(spawn.Config{System: sys, Store: store, Model: lastWords{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()
	parent, err := agent.New(ctx, agent.Config{Store: store, Model: lastWords{}, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		fmt.Println(err)
		return
	}

	c, err := svc.StartContinuable(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text("hello")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	first, err := mgr.Collect(ctx, "parent", c.Task.ID, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := svc.SendMessage(ctx, parent, c.ChildID, []subagent.ContentBlock{subagent.Text("and again")}, "user")
	if err != nil {
		fmt.Println(err)
		return
	}
	second, err := mgr.Collect(ctx, "parent", d.Task.ID, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.State, subagent.TextOf(first.Result.Output))
	fmt.Println(d.Route, second.State, subagent.TextOf(second.Result.Output))
	// Output:
	// completed hello (1 messages)
	// started completed and again (2 messages)
}

// A durable child resumed from its log (S6): the new activation sees the
// earlier turn and answers the new prompt; the run has a new id, the
// session is the same.
func ExampleService_Resume() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()
	store := persistence.NewMemory()
	p, err := spawn.New(spawn.Config{System: sys, Store: store, Model: lastWords{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()
	parent, err := agent.New(ctx, agent.Config{Store: store, Model: lastWords{}, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	finish := func(r subagent.Run, err error) (subagent.Run, string) {
		if err != nil {
			return nil, err.Error()
		}
		res, err := r.Wait(ctx)
		if derr := r.Dispose(ctx); err == nil {
			err = derr
		}
		if err != nil {
			return nil, err.Error()
		}
		return r, subagent.TextOf(res.Output)
	}
	first, out := finish(svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text("hello")}}))
	fmt.Println(out)
	if first == nil {
		return
	}
	again, out := finish(svc.Resume(ctx, spawn.DefaultName, subagent.StartRequest{Parent: parent,
		Prompt:       []subagent.ContentBlock{subagent.Text("more")},
		Continuation: &subagent.Continuation{SessionID: first.SessionID()}}))
	fmt.Println(out)
	if again != nil {
		fmt.Println(again.SessionID() == first.SessionID(), again.ID() != first.ID())
	}
	// Output:
	// hello (1 messages)
	// more (2 messages)
	// true true
}
