//go:build subactortest

package registry_test

import (
	"fmt"
	"testing"

	"github.com/subactor/subactor/actors/internal/guard"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract A2: a real panic inside the registry's Receive answers the
// command it was handling with a typed error; the registry keeps its
// state and its parent actors, so later calls work and none blocks.
func TestA2_APanicInTheRegistryAnswersTheCallAndKeepsTheState(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	events := make(recorder, 8)
	defer f.svc.ListenParent(top.SessionID(), events.listen).Release()
	restore := guard.SetHook(func(kind string, msg any) {
		if kind == "registry" && fmt.Sprintf("%T", msg) == "*registry.listNames" {
			panic("injected")
		}
	})
	if got := f.svc.List(); got != nil {
		t.Fatalf("List through a crash = %v, want nothing", got)
	}
	restore()
	if got := f.svc.List(); len(got) != 1 || got[0] != "p" {
		t.Fatalf("List after the crash = %v", got)
	}
	// The parent actor survived: its listener hears the next run.
	r, err := f.svc.Start(testkit.Ctx(t), "p", request("after"))
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(testkit.Ctx(t))
	r.Dispose(testkit.Ctx(t))
	if _, ok := events.next(t).(subagent.RunStarted); !ok {
		t.Fatal("the parent's listener missed the start after a registry crash")
	}
}
