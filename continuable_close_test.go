package subactor_test

import (
	"testing"

	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contracts S7, T3 (issue 16): Service.Close kills a live activation of a
// continuable child and returns only once it quiesced: its task is
// recorded killed, with no output, when Close returns (the task manager
// still open).
func TestS7_ServiceCloseKillsALiveActivationAndRecordsItBeforeReturning(t *testing.T) {
	model := &blockingChild{entered: make(chan struct{}, 1)}
	e := newContinuable(t, model)
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, model.entered, "the activation's model call")
	e.rt.Service.Close()
	if !model.returned.Load() {
		t.Fatal("Service.Close returned before the activation's model call had stopped")
	}
	rec, err := e.rt.Store.(persistence.TaskStore).GetTask(testkit.Ctx(t), c.Task.ID)
	if err != nil || rec.State != string(tasks.Killed) {
		t.Fatalf("the activation's task record when Close returned: %+v, %v (want killed)", rec, err)
	}
	if got, err := e.mgr.Get(testkit.Ctx(t), "parent", c.Task.ID); err != nil || got.State != tasks.Killed || got.Result.Output != nil {
		t.Fatalf("the activation's task %+v, %v", got, err)
	}
}
