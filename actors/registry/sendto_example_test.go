package registry_test

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// An embedder's own actor follows a parent's runs: the parent actor sends
// it each run event as a protobuf message of package messages, in order,
// and watches it. Flush returns once the actor has handled every event
// sent so far.
func ExampleSendTo() {
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

	// The platform's actor: it handles run events like any other message.
	follower := sys.ActorSystem().Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.RunStarted:
			fmt.Println("started", m.GetProvider())
		case *messages.RunEnded:
			fmt.Println("ended", m.GetStopReason(), m.GetLastAssistantMessage())
		}
	}))
	sub := svc.ListenParent(parent.SessionID(), nil, registry.SendTo(follower),
		registry.OnlyEvents(subagent.TypeOf(subagent.RunStarted{}), subagent.TypeOf(subagent.RunEnded{})))
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
	// started spawn
	// ended completed hello
}
