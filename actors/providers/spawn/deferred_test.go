package spawn_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// writeCounter counts the writes a bbolt store makes durable (a commit
// each when alone) and the creates it defers.
type writeCounter struct {
	persistence.Backend
	mu             sync.Mutex
	writes, defers int
}

func (w *writeCounter) count(n *int) {
	w.mu.Lock()
	*n++
	w.mu.Unlock()
}

func (w *writeCounter) counts() (writes, defers int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.defers
}

func (w *writeCounter) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	w.count(&w.writes)
	return w.Backend.CreateWith(ctx, h, recs...)
}

func (w *writeCounter) CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	w.count(&w.defers)
	return w.Backend.(interface {
		CreateDeferred(context.Context, subagent.SessionHeader, ...persistence.Record) (uint64, error)
	}).CreateDeferred(ctx, h, recs...)
}

func (w *writeCounter) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	w.count(&w.writes)
	return w.Backend.AppendAt(ctx, id, expect, recs...)
}

func (w *writeCounter) Append(ctx context.Context, id string, recs ...persistence.Record) error {
	w.count(&w.writes)
	return w.Backend.Append(ctx, id, recs...)
}

// gated answers "done" once its gate is closed.
type gated struct{ gate chan struct{} }

func (g gated) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	select {
	case <-g.gate:
		return final("done"), nil
	case <-ctx.Done():
		return agent.Response{}, ctx.Err()
	}
}

// Contracts R1 and S9 on a store that defers creates (bbolt): a spawned
// child's session is a session to every reader of the store before Start
// returns (header, descriptor, prompt), and it is stored by the child's
// first turn, in that turn's write: a delegation takes one durable write.
// S7: a continuable child's first activation stores its session, with its
// descriptor, before Start returns.
func TestR1_S9_S7_ASpawnedChildIsStoredWithItsFirstTurn(t *testing.T) {
	bolt, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	store := &writeCounter{Backend: bolt}
	e := newEnv(t)
	model := gated{gate: make(chan struct{})}
	p, err := spawn.New(spawn.Config{System: e.sys, Store: store, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	release, err := e.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	parent, err := agent.New(t.Context(), agent.Config{Store: store, Model: model, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := store.counts()

	run, err := e.svc.Start(t.Context(), spawn.DefaultName, subagent.StartRequest{Prompt: prompt("go"), Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := store.Load(t.Context(), run.ID())
	if err != nil || h.ParentSessionID != "parent" || len(recs) != 2 || recs[0].Kind != descriptor.Kind || recs[1].Kind != persistence.KindMessage {
		t.Fatalf("the child's session after Start: %+v, %d records, %v", h, len(recs), err)
	}
	if kids, err := store.Children(t.Context(), "parent"); err != nil || len(kids) != 1 || kids[0].Header.SessionID != run.ID() {
		t.Fatalf("the parent's children after Start: %+v, %v", kids, err)
	}
	if writes, defers := store.counts(); writes != before || defers != 1 {
		t.Fatalf("Start made %d durable writes and %d deferred creates, want none and one", writes-before, defers)
	}
	close(model.gate)
	if res := finish(t, run); res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	if writes, _ := store.counts(); writes != before+1 {
		t.Fatalf("the delegation made %d durable writes, want one", writes-before)
	}
	_, entries, err := store.LoadFrom(t.Context(), run.ID(), 0)
	if err != nil || len(entries) != 4 || entries[2].Kind != persistence.KindMessage || entries[3].Kind != agentlog.KindStop || entries[3].Seq != 4 {
		t.Fatalf("the child's log: %+v, %v", entries, err)
	}

	// A continuable child's first activation, as the Service starts it,
	// parked on its model.
	p, err = spawn.New(spawn.Config{System: e.sys, Store: store, Model: gated{gate: make(chan struct{})}})
	if err != nil {
		t.Fatal(err)
	}
	run, err = p.Start(testkit.Ctx(t), subagent.Scope{RunID: "continuable", Continuable: true}, subagent.StartRequest{Prompt: prompt("go"), Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if writes, defers := store.counts(); writes != before+2 || defers != 1 {
		t.Fatalf("a continuable start made %d durable writes and %d deferred creates, want one and none", writes-before-1, defers-1)
	}
	if err := run.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}
