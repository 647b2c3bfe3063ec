//go:build subactortest

package parent_test

import (
	"slices"
	"testing"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/actors/internal/local"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract A2: a real panic inside the parent's Receive is recovered in
// place; its listeners are told to resynchronise, stay subscribed, and the
// actor goes on sequencing the next run.
func TestA2_APanicInTheParentTellsListenersAndKeepsThem(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	raw := sys.ActorSystem()
	pid := spawnUnderProbe(t, raw, make(chan int64, 4))
	_, got := subscribe(t, raw, pid)
	restore := guard.SetHook(func(kind string, msg any) {
		if s, ok := msg.(*local.Settled); ok && kind == "parent" && s.RunID == "r1" {
			panic("injected")
		}
	})
	defer restore()
	for _, id := range []string{"r1", "r2"} {
		raw.Root.Send(pid, &local.Expect{RunID: id})
		raw.Root.Send(pid, &local.Published{RunID: id})
		raw.Root.Send(pid, &local.Settled{RunID: id, Result: subagent.Result{StopReason: subagent.Completed}})
	}
	var types []string
	for range 4 {
		types = append(types, subagent.TypeOf(testkit.Recv(t, got, "the next event")))
	}
	want := []string{"subagent/start", "subagent/listener-failed", "subagent/start", "subagent/end"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}
