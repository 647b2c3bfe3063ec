package run

import (
	"context"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/subagent"
)

// TestA2_ACrashedRunActorSettlesErrorAndStillDisposes delivers what
// protoactor's supervisor delivers to an actor whose Receive panicked
// (Restarting, then Started again): the run settles with stop reason error,
// its child is cancelled, and Dispose still quiesces it.
func TestA2_ACrashedRunActorSettlesErrorAndStillDisposes(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	cancelled := make(chan struct{})
	started := make(chan struct{})
	h := Start(sys, Spec{ID: "r", Ctx: context.Background(), Body: func(ctx context.Context, _ *Gate) (subagent.Result, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return subagent.Stopped(subagent.Aborted, ""), nil
	}})
	<-started
	root := sys.ActorSystem().Root
	root.Send(h.pid, &actor.Restarting{})
	root.Send(h.pid, &actor.Started{}) // must not start a second child
	res, err := h.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Error || !strings.Contains(res.Detail, "crashed") {
		t.Fatalf("crashed run settled %+v, %v", res, err)
	}
	<-cancelled
	if err := h.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
}
