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

// Run events: a listener on a parent hears each run the parent delegates,
// its start, its progress and its end with the run's result, in order;
// OnlyEvents narrows it to starts and ends here. Flush waits until
// everything emitted so far was handled.
func ExampleService_ListenParent() {
	ctx := context.Background()
	sys := actors.NewSystem()
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()
	store := persistence.NewMemory()
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: scripted.New()})
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

	// A listener runs on a goroutine of its own, one event at a time.
	sub := svc.ListenParent(parent.SessionID(), func(ev subagent.Event) error {
		switch ev := ev.(type) {
		case subagent.RunStarted:
			fmt.Println(subagent.TypeOf(ev), ev.Provider, ev.Local)
		case subagent.RunEnded:
			fmt.Println(subagent.TypeOf(ev), ev.StopReason, subagent.TextOf(ev.Result.Output))
		}
		return nil
	}, registry.OnlyEvents(subagent.TypeOf(subagent.RunStarted{}), subagent.TypeOf(subagent.RunEnded{})))
	defer sub.Release()

	run, err := svc.Start(ctx, spawn.DefaultName, subagent.StartRequest{
		Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text("echo hello")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = run.Wait(ctx)
	if derr := run.Dispose(ctx); err == nil {
		err = derr
	}
	if err == nil {
		err = sub.Flush(ctx)
	}
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// subagent/start spawn true
	// subagent/end completed hello
}
