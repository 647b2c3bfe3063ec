package otelx_test

import (
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// node is what one process holds for continuable children: a Service
// with a task manager and a spawn provider on the scripted model over
// store, and the parent agent "parent" (created, or resumed from store).
type node struct {
	svc    *registry.Service
	mgr    *tasks.Manager
	parent *agent.Agent
	stop   func()
}

func newNode(t *testing.T, store persistence.Backend, resume bool) *node {
	t.Helper()
	ctx := testkit.Ctx(t)
	sys := actors.NewSystem()
	mgr := tasks.New(sys, store)
	svc := registry.New(sys, registry.WithTasks(mgr))
	n := &node{svc: svc, mgr: mgr}
	n.stop = func() {
		svc.Close()
		_ = mgr.Close(ctx)
		sys.Shutdown()
	}
	t.Cleanup(n.stop)
	p, err := spawn.New(spawn.Config{System: sys, Store: store, Model: scripted.New()})
	if err != nil {
		t.Fatal(err)
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	if n.parent, err = agent.New(ctx, agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "parent"}, Resume: resume}); err != nil {
		t.Fatal(err)
	}
	return n
}

// collect waits for the parent's task id to end, and requires it
// completed.
func (n *node) collect(t *testing.T, id string) {
	t.Helper()
	task, err := n.mgr.Collect(testkit.Ctx(t), "parent", id, testkit.Scale(time.Minute))
	if err != nil || task.State != tasks.Completed {
		t.Fatalf("task %s: %+v, %v", id, task, err)
	}
}

// followUp sends the child a follow-up, which starts its next activation
// (it is idle), and waits for that to complete.
func (n *node) followUp(t *testing.T, childID, text string) {
	t.Helper()
	d, err := n.svc.SendMessage(testkit.Ctx(t), n.parent, childID, []subagent.ContentBlock{subagent.Text(text)}, "user")
	if err != nil || d.Route != registry.Started {
		t.Fatalf("follow-up: %+v, %v", d, err)
	}
	n.collect(t, d.Task.ID)
}

// activations are the run spans of the continuable child childID, in
// the order they ended: its first activation (run id childID) and those
// resumed from its log (subactor.resumed_from childID).
func activations(t *testing.T, exp *tracetest.InMemoryExporter, childID string) []tracetest.SpanStub {
	t.Helper()
	var runs []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name != "invoke_agent "+spawn.DefaultName {
			continue
		}
		for _, kv := range s.Attributes {
			if (kv.Key == otelx.AgentID || kv.Key == otelx.SubResumedFrom) && kv.Value.AsString() == childID {
				runs = append(runs, s)
				break
			}
		}
	}
	return runs
}

// linksTo fails unless span s links to earlier's span context, and only
// to it.
func linksTo(t *testing.T, s, earlier tracetest.SpanStub) {
	t.Helper()
	if len(s.Links) != 1 {
		t.Fatalf("the resumed activation's run span has %d links, want 1 (to its earlier activation)", len(s.Links))
	}
	got, want := s.Links[0].SpanContext, earlier.SpanContext
	if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsSampled() {
		t.Fatalf("the resumed activation links to %s/%s, want the earlier activation's run span %s/%s",
			got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
	}
	if s.SpanContext.SpanID() == want.SpanID() {
		t.Fatal("the resumed activation's run span is the earlier one's")
	}
}

// Contract O3: a continuable child's activation resumed from its log (a
// follow-up to an idle child) has a run span of its own, which links to
// the run span of the child's earlier activation; the next one links to
// the second, not the first.
func TestO3_ResumedChildLinksToItsEarlierActivation(t *testing.T) {
	exp := testkit.Tracing(t)
	n := newNode(t, persistence.NewMemory(), false)
	c, err := n.svc.StartContinuable(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Parent: n.parent, Prompt: []subagent.ContentBlock{subagent.Text("echo first")}})
	if err != nil {
		t.Fatal(err)
	}
	n.collect(t, c.Task.ID)
	n.followUp(t, c.ChildID, "echo second")
	n.followUp(t, c.ChildID, "echo third")
	runs := activations(t, exp, c.ChildID)
	if len(runs) != 3 {
		t.Fatalf("%d run spans of the child, want 3 activations", len(runs))
	}
	if len(runs[0].Links) != 0 {
		t.Errorf("the first activation's run span has links %v", runs[0].Links)
	}
	linksTo(t, runs[1], runs[0])
	linksTo(t, runs[2], runs[1])
}

// Contract O3 across a restart: the earlier activation's span context is
// in the child's log, so an activation resumed by another process (here,
// everything made again over the bbolt file opened again) links to it.
func TestO3_ResumedChildLinksToItsActivationBeforeARestart(t *testing.T) {
	exp := testkit.Tracing(t)
	path := filepath.Join(t.TempDir(), "sessions.db")
	store, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	before := newNode(t, store, false)
	c, err := before.svc.StartContinuable(testkit.Ctx(t), spawn.DefaultName, subagent.StartRequest{Parent: before.parent, Prompt: []subagent.ContentBlock{subagent.Text("echo before")}})
	if err != nil {
		t.Fatal(err)
	}
	before.collect(t, c.Task.ID)
	before.stop()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if store, err = persistence.OpenBolt(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	after := newNode(t, store, true)
	after.followUp(t, c.ChildID, "echo after")
	runs := activations(t, exp, c.ChildID)
	if len(runs) != 2 {
		t.Fatalf("%d run spans of the child, want 2 activations", len(runs))
	}
	linksTo(t, runs[1], runs[0])
}

// Contract O3 for a top-level agent: a session continued (node run
// -continue: agent.New with Resume, then Run) has a run span that links
// to the one of the run before it, recorded in the session's log.
func TestO3_ContinuedSessionLinksToItsEarlierRun(t *testing.T) {
	exp := testkit.Tracing(t)
	store := persistence.NewMemory()
	ctx := testkit.Ctx(t)
	run := func(resume bool, prompt string) {
		t.Helper()
		a, err := agent.New(ctx, agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "top"}, Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if res := a.Run(ctx, []subagent.ContentBlock{subagent.Text(prompt)}, nil); res.StopReason != subagent.Completed {
			t.Fatalf("%s: %+v", prompt, res)
		}
	}
	run(false, "echo first")
	run(true, "echo continued")
	var runs []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "invoke_agent "+otelx.TopAgent {
			runs = append(runs, s)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d top-level run spans, want 2", len(runs))
	}
	if runs[0].SpanContext.TraceID() == runs[1].SpanContext.TraceID() {
		t.Error("a continued session's run is in its earlier run's trace, want a trace of its own (linked)")
	}
	linksTo(t, runs[1], runs[0])
}
