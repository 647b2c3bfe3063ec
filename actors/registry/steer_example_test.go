package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

// Steering a working child: a run that is a subagent.Steerer takes a
// message into its child's next model request. Steer returns once that
// request has admitted it, so "admitted" means the model saw it; after
// the run ended, Steer fails with subagent.ErrNotDelivered and nothing is
// queued.
func ExampleService_Start_steer() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()
	store := persistence.NewMemory()
	tools, err := fstools.New(".", fstools.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: untilTold{}, Tools: tools})
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := svc.RegisterProvider(provider)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()
	parent, err := agent.New(ctx, agent.Config{
		Store: store, Model: scripted.New(),
		Header: subagent.SessionHeader{SessionID: "parent"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	run, err := svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{
		Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text("look around until told")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Dispose(ctx)
	steerer, ok := run.(subagent.Steerer)
	if !ok {
		fmt.Println("this run cannot be steered")
		return
	}
	fmt.Println("steered:", steerer.Steer(ctx, []subagent.ContentBlock{subagent.Text("that is enough")}))
	res, err := run.Wait(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))
	err = steerer.Steer(ctx, []subagent.ContentBlock{subagent.Text("too late")})
	fmt.Println(errors.Is(err, subagent.ErrNotDelivered))
	// Output:
	// steered: <nil>
	// completed stopped, as told: that is enough
	// true
}

// untilTold lists the working directory, step after step, until a
// request carries a second user message (the steer), and then answers.
type untilTold struct{}

func (untilTold) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	var told []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			told = append(told, subagent.TextOf(m.Content))
		}
	}
	if len(told) > 1 {
		return agent.Response{Message: agent.Message{Role: agent.Assistant,
			Content: []subagent.ContentBlock{subagent.Text("stopped, as told: " + told[len(told)-1])}}}, nil
	}
	return agent.Response{Message: agent.Message{Role: agent.Assistant, ToolCalls: []agent.ToolCall{
		{ID: fmt.Sprint("list-", len(req.Messages)), Name: "list", Args: json.RawMessage(`{"path":"."}`)},
	}}}, nil
}
