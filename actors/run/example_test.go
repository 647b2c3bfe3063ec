package run_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// workers is a provider of three kinds of child, each a run actor: a
// "researcher" that answers with the first steer it takes, a "flaky"
// one that panics on its first activation and finishes when its
// supervisor restarts it from its checkpoint, and a "summariser" that
// answers at once.
type workers struct{ sys *actors.System }

func (workers) Name() string                        { return "workers" }
func (workers) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (workers) InheritsParentContext() bool         { return false }

func (w workers) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	answer := func(s string) (subagent.Result, error) {
		return subagent.Result{Output: []subagent.ContentBlock{subagent.Text(s)}, StopReason: subagent.Completed}, nil
	}
	spec := run.Spec{Scope: scope, Ctx: ctx}
	switch subagent.TextOf(req.Prompt) {
	case "researcher":
		spec.Body = func(ctx context.Context, g run.Gate) (subagent.Result, error) {
			for {
				steers, err := g.Take(ctx) // before each model request
				if err != nil {
					return subagent.Result{StopReason: subagent.Aborted}, nil
				}
				if len(steers) > 0 {
					return answer("researched " + subagent.TextOf(steers[0]))
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Millisecond): // the next model request
				}
			}
		}
	case "flaky":
		spec.Body = func(context.Context, run.Gate) (subagent.Result, error) { panic("lost its tool") }
		spec.Relaunch = func(context.Context, run.Gate) (subagent.Result, error) {
			return answer("recovered from its checkpoint")
		}
	default:
		spec.Body = func(context.Context, run.Gate) (subagent.Result, error) { return answer("summarised") }
	}
	return run.Start(w.sys, spec), nil
}

// A platform's supervisor actor starts three delegations as its
// children, watches them, steers one by message, lets a OneForOne
// strategy restart the one that panics, and disposes all three.
func ExampleSpawn() {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	provider := workers{sys}
	results := make(chan string, 3)
	done := make(chan struct{})
	names := map[string]string{} // run PID id → kind
	settled, quiesced := 0, 0
	supervisor := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			for _, kind := range []string{"researcher", "flaky", "summariser"} {
				pid, err := run.Spawn(context.Background(), c, provider, subagent.StartRequest{Prompt: []subagent.ContentBlock{subagent.Text(kind)}})
				if err != nil {
					panic(err)
				}
				names[pid.Id] = kind
				c.Watch(pid)                      // protoactor's Terminated once it has quiesced
				c.Request(pid, &messages.Watch{}) // its RunSettled, then RunQuiesced
				if kind == "researcher" {
					c.Request(pid, &messages.Steer{SteerId: 1, Content: []*messages.ContentBlock{{Type: "text", Text: "the cache layer"}}})
				}
			}
		case *messages.RunSettled:
			results <- fmt.Sprintf("%s: %s %q", names[c.Sender().Id], m.Result.StopReason, m.Result.Output[0].Text)
			if settled++; settled == 3 {
				for id := range names {
					c.Request(actor.NewPID(c.Self().Address, id), &messages.Dispose{})
				}
			}
		case *actor.Terminated:
			if quiesced++; quiesced == 3 {
				close(done)
			}
		}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)))
	sys.ActorSystem().Root.Spawn(supervisor)

	var lines []string
	for range 3 {
		lines = append(lines, <-results)
	}
	<-done
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// flaky: completed "recovered from its checkpoint"
	// researcher: completed "researched the cache layer"
	// summariser: completed "summarised"
}
