package registry_test

import (
	"context"
	"fmt"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// A program embedding subactor: one actor system, one Service, a spawn
// provider on the embedded scripted model, and a child started, awaited and
// disposed on behalf of a parent agent.
func ExampleService() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()

	store := persistence.NewMemory()
	model := scripted.New()
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: model})
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

	// The delegating agent: a top-level agent with a session of its own.
	parent, err := agent.New(ctx, agent.Config{
		Store: store, Model: model,
		Header: subagent.SessionHeader{SessionID: "parent"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	run, err := svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{
		Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text("echo hello")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Wait(ctx)
	// The caller owns the run: dispose it on every path.
	if derr := run.Dispose(ctx); err == nil {
		err = derr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))
	// Output: completed hello
}
