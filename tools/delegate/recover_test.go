package delegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/agenttest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// errCrash is what crashStore answers for the writes a crash prevented.
var errCrash = errors.New("crashStore: the process died before this write")

// crashStore is a store whose process dies, as far as the log can tell,
// at the first write refuse matches: while armed, that write and every
// one refuse matches after it never reach the log.
type crashStore struct {
	persistence.Store
	armed  atomic.Bool
	refuse func(id string, h *subagent.SessionHeader, recs []persistence.Record) bool
}

func (s *crashStore) CreateWith(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error) {
	if s.armed.Load() && s.refuse(h.SessionID, &h, recs) {
		return 0, errCrash
	}
	return s.Store.CreateWith(ctx, h, recs...)
}

func (s *crashStore) AppendAt(ctx context.Context, id string, expect uint64, recs ...persistence.Record) (uint64, error) {
	if s.armed.Load() && s.refuse(id, nil, recs) {
		return 0, errCrash
	}
	return s.Store.AppendAt(ctx, id, expect, recs...)
}

// hasResult reports whether recs carry a tool result.
func hasResult(recs []persistence.Record) bool {
	for _, r := range recs {
		var m agent.Message
		if r.Kind == persistence.KindMessage && json.Unmarshal(r.Data, &m) == nil && m.Role == agent.ToolRole {
			return true
		}
	}
	return false
}

// hasStop reports whether recs carry an agentlog.KindStop record.
func hasStop(recs []persistence.Record) bool {
	for _, r := range recs {
		if r.Kind == agentlog.KindStop {
			return true
		}
	}
	return false
}

// stepTool is a child's tool that answers at once.
type stepTool struct{}

func (stepTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "step", Description: "a step", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (stepTool) Call(context.Context, *agent.Agent, json.RawMessage) (string, error) {
	return "stepped", nil
}

const (
	parentID  = "parent"
	childTask = "the child's task"
)

// recovery is a parent whose delegation a crash interrupted: its log ends
// with the delegate call without a result.
type recovery struct {
	env    *env
	store  *crashStore
	tool   *delegate.Tool
	child  *agenttest.Recorder
	parent *agenttest.Recorder
	depth  int                   // the parent's delegation depth
	opts   subagent.AgentOptions // the parent's options on resume
}

// crashDuring runs a parent that delegates childTask once, over a store
// that crashes at the first write refuse matches and never stores the
// call's result. child answers the child's model calls.
func crashDuring(t *testing.T, child func(agent.Request) agent.Response, refuse func(id string, h *subagent.SessionHeader, recs []persistence.Record) bool) *recovery {
	t.Helper()
	rec := agenttest.NewRecorder(child)
	return crashAt(t, 0, rec, rec, refuse)
}

// crashAt is crashDuring for a parent at delegation depth depth whose
// child's model is model, which records its requests in child.
func crashAt(t *testing.T, depth int, child *agenttest.Recorder, model agent.Model, refuse func(id string, h *subagent.SessionHeader, recs []persistence.Record) bool) *recovery {
	t.Helper()
	e := newEnv(t)
	r := &recovery{
		env: e,
		store: &crashStore{Store: e.store, refuse: func(id string, h *subagent.SessionHeader, recs []persistence.Record) bool {
			// The parent never stores its call's result: it died first.
			return (id == parentID && hasResult(recs)) || refuse(id, h, recs)
		}},
		child: child,
		depth: depth,
		parent: agenttest.NewRecorder(func(req agent.Request) agent.Response {
			if last := req.Messages[len(req.Messages)-1]; last.Role == agent.ToolRole {
				return final("parent heard: " + subagent.TextOf(last.Content))
			}
			return callTool(delegate.DefaultName, `{"description":"a task","prompt":"`+childTask+`"}`)
		}),
	}
	p, err := spawn.New(spawn.Config{System: e.sys, Store: r.store, Model: model, Tools: []agent.Tool{stepTool{}}})
	if err != nil {
		t.Fatal(err)
	}
	e.register(t, p)
	r.tool = newTool(t, e.svc, delegate.Config{Provider: spawn.DefaultName, Store: r.store}, true)
	r.store.armed.Store(true)
	a := r.newParent(t, false)
	res := a.Run(testkit.Ctx(t), text("delegate it"), nil)
	if res.StopReason != subagent.Error || !errors.Is(res.Cause, errCrash) {
		t.Fatalf("the crashed run stopped %s (%v): %s", res.StopReason, res.Cause, res.Detail)
	}
	a.Close()
	r.store.armed.Store(false)
	return r
}

// newParent creates the parent agent, or loads it with resume.
func (r *recovery) newParent(t *testing.T, resume bool) *agent.Agent {
	t.Helper()
	a, err := agent.New(testkit.Ctx(t), agent.Config{
		Store: r.store, Model: r.parent, Tools: []agent.Tool{r.tool}, Resume: resume, Options: r.opts,
		Header: subagent.SessionHeader{SessionID: parentID, DelegationDepth: r.depth},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// childID is the child the parent's delegate call names: its turn's
// record and the call's place in it (delegate.ChildID).
func (r *recovery) childID(t *testing.T) string {
	t.Helper()
	return childOf(t, r.store, parentID)
}

// childOf is the child that the first delegate call of session parent
// names.
func childOf(t *testing.T, store persistence.Store, parent string) string {
	t.Helper()
	_, log, err := store.LoadFrom(testkit.Ctx(t), parent, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		var m agent.Message
		if e.Kind == persistence.KindMessage && json.Unmarshal(e.Data, &m) == nil && len(m.ToolCalls) > 0 {
			return delegate.ChildID(parent, agent.CallRef{Seq: e.Seq})
		}
	}
	t.Fatalf("the log of %s has no delegate call", parent)
	return ""
}

// childLog is the child's log.
func (r *recovery) childLog(t *testing.T) []persistence.Entry {
	t.Helper()
	_, log, err := r.store.LoadFrom(testkit.Ctx(t), r.childID(t), 0)
	if err != nil {
		t.Fatalf("the child's log: %v", err)
	}
	return log
}

// resume continues the parent with no prompt and checks that the call's
// result is the child's answer, from the child the call named.
func (r *recovery) resume(t *testing.T, want string) {
	t.Helper()
	res := r.newParent(t, true).Run(testkit.Ctx(t), nil, nil)
	if res.StopReason != subagent.Completed {
		t.Fatalf("the resumed parent stopped %s: %s", res.StopReason, res.Detail)
	}
	reqs := r.parent.Requests("delegate it")
	var got delegate.Answer
	result := toolResult(t, reqs[len(reqs)-1])
	if result.IsError || json.Unmarshal([]byte(subagent.TextOf(result.Content)), &got) != nil {
		t.Fatalf("the recovered call's result: %+v", result)
	}
	if got.Output != want || got.SessionID != r.childID(t) {
		t.Fatalf("the recovered call answered %+v, want %q from child %s", got, want, r.childID(t))
	}
}

// Contract S9: a child that completed before its parent died gives its
// recorded answer when the parent resumes, without a model call of its
// own; its log stays as it was.
func TestS9_ACompletedChildGivesItsRecordedResult(t *testing.T) {
	r := crashDuring(t, func(agent.Request) agent.Response { return final("forty-two") },
		func(string, *subagent.SessionHeader, []persistence.Record) bool { return false })
	before := r.childLog(t)
	r.resume(t, "forty-two")
	if n := len(r.child.Requests(childTask)); n != 1 {
		t.Fatalf("the child's model was called %d times, want once: a completed child ran again", n)
	}
	if after := r.childLog(t); len(after) != len(before) {
		t.Fatalf("the completed child's log grew from %d to %d records", len(before), len(after))
	}
}

// Contract S9: a child that was running when its parent died (its log
// has a tool call and its result, no stop) is resumed from its own log: a
// new activation of the same session whose model sees the earlier turns,
// and that activation's answer is the call's result.
func TestS9_ARunningChildIsResumedFromItsLog(t *testing.T) {
	r := crashDuring(t, func(req agent.Request) agent.Response {
		if req.Messages[len(req.Messages)-1].Role == agent.ToolRole {
			return final("done after " + subagent.TextOf(req.Messages[len(req.Messages)-1].Content))
		}
		return callTool("step", `{}`)
	}, func(id string, _ *subagent.SessionHeader, recs []persistence.Record) bool {
		// The child dies with its parent: its answer and stop are lost.
		return id != parentID && hasStop(recs)
	})
	before := r.childLog(t)
	r.resume(t, "done after stepped")
	reqs := r.child.Requests(childTask)
	if len(reqs) != 3 {
		t.Fatalf("the child's model was called %d times, want 3 (two before the crash, one after)", len(reqs))
	}
	if got := len(reqs[2].Messages); got != 3 {
		t.Fatalf("the resumed child's request has %d messages, want its 3 earlier turns: it was not resumed from its log", got)
	}
	after := r.childLog(t)
	for i, e := range before {
		if after[i].Seq != e.Seq || after[i].Kind != e.Kind || string(after[i].Data) != string(e.Data) {
			t.Fatalf("the child's record %d changed on resume", e.Seq)
		}
	}
	if k := after[len(before)].Kind; k != agentlog.KindActivation {
		t.Fatalf("the child's log goes on with %s, want a new activation", k)
	}
	if r.store.Store.(*countingStore).creates() != 2 {
		t.Fatalf("%d sessions were created, want the parent's and one child's", r.store.Store.(*countingStore).creates())
	}
}

// Contract S9: a call whose child never started (the parent died with
// its call recorded, before the child's session existed) runs anew on
// resume, its child named after the call.
func TestS9_ACallWhoseChildNeverStartedRunsAnew(t *testing.T) {
	r := crashDuring(t, func(agent.Request) agent.Response { return final("fresh") },
		func(_ string, h *subagent.SessionHeader, _ []persistence.Record) bool {
			return h != nil && h.ParentSessionID == parentID
		})
	if _, _, err := r.store.LoadFrom(testkit.Ctx(t), r.childID(t), 0); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the child's session exists before the resume: %v", err)
	}
	if n := len(r.child.Requests(childTask)); n != 0 {
		t.Fatalf("the child's model was called %d times before the resume", n)
	}
	r.resume(t, "fresh")
	if n := len(r.child.Requests(childTask)); n != 1 {
		t.Fatalf("the child's model was called %d times, want once", n)
	}
	if log := r.childLog(t); !strings.Contains(string(log[len(log)-1].Data), "completed") {
		t.Fatalf("the child's log ends with %s", log[len(log)-1].Data)
	}
}

// The two ways a parent's call can leave its child to be started or
// resumed on recovery (see the S9 tests above).
var (
	// neverStarted: the parent died before its child's session existed.
	neverStarted = func(_ string, h *subagent.SessionHeader, _ []persistence.Record) bool {
		return h != nil && h.ParentSessionID == parentID
	}
	// diedRunning: the child died with its parent, its answer and stop
	// lost after a step of its own.
	diedRunning = func(id string, _ *subagent.SessionHeader, recs []persistence.Record) bool {
		return id != parentID && hasStop(recs)
	}
)

// stepThenAnswer is a child's model that takes a step, then answers.
func stepThenAnswer(req agent.Request) agent.Response {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.ToolRole {
		return final("done after " + subagent.TextOf(last.Content))
	}
	return callTool("step", `{}`)
}

// Contracts S9, D6: depth applies to a recovered call as to a fresh one.
// A parent at depth 1 delegated under the default cap and died; it
// resumes at its cap (the tool's cap lowered to 1, or a cap of 1 it
// inherited). Its call, whether the child never started or was running,
// is refused with the depth error a fresh delegation of the same parent
// gets: no child starts, none is resumed, no session is created, and the
// call's result is that error.
func TestS9_D6_ARecoveredCallAtTheDepthCapIsRefusedAsAFreshOne(t *testing.T) {
	one := 1
	for _, c := range []struct {
		name   string
		child  func(agent.Request) agent.Response
		refuse func(string, *subagent.SessionHeader, []persistence.Record) bool
	}{
		{"never started", func(agent.Request) agent.Response { return final("fresh") }, neverStarted},
		{"running", stepThenAnswer, diedRunning},
	} {
		for _, capped := range []string{"tool cap", "inherited cap"} {
			t.Run(c.name+", "+capped, func(t *testing.T) {
				rec := agenttest.NewRecorder(c.child)
				r := crashAt(t, 1, rec, rec, c.refuse)
				if capped == "tool cap" {
					r.tool = newTool(t, r.env.svc, delegate.Config{Provider: spawn.DefaultName, Store: r.store, MaxDepth: 1}, true)
				} else {
					r.opts = subagent.AgentOptions{MaxDepth: &one}
				}
				// What a fresh delegation of a parent like this one gets.
				fresh := r.env.agentAt(t, "fresh", 1, r.opts, nil)
				t.Cleanup(fresh.Close)
				_, want := r.tool.Call(testkit.Ctx(t), fresh, json.RawMessage(`{"description":"a task","prompt":"`+childTask+`"}`))
				var d *rules.DepthError
				if !errors.As(want, &d) || d.Depth != 1 || d.Max != 1 || !errors.Is(want, subagent.ErrDepthExceeded) {
					t.Fatalf("a fresh delegation at the cap answered %v, want a depth error", want)
				}

				id := r.childID(t)
				_, before, err := r.store.LoadFrom(testkit.Ctx(t), id, 0)
				if started := err == nil; started != (c.name == "running") || (!started && !errors.Is(err, persistence.ErrNotFound)) {
					t.Fatalf("the child's log before the resume: %v", err)
				}
				calls, creates := len(rec.Requests(childTask)), r.env.store.creates()
				res := r.newParent(t, true).Run(testkit.Ctx(t), nil, nil)
				if res.StopReason != subagent.Completed {
					t.Fatalf("the resumed parent stopped %s: %s", res.StopReason, res.Detail)
				}
				reqs := r.parent.Requests("delegate it")
				if got := toolResult(t, reqs[len(reqs)-1]); !got.IsError || subagent.TextOf(got.Content) != want.Error() {
					t.Fatalf("the recovered call's result is %+v, want the error %q", got, want)
				}
				if n := len(rec.Requests(childTask)); n != calls {
					t.Fatalf("the child's model was called %d times on recovery: a call beyond the cap ran", n-calls)
				}
				if n := r.env.store.creates(); n != creates {
					t.Fatalf("%d sessions were created on recovery: a child beyond the cap started", n-creates)
				}
				if _, after, err := r.store.LoadFrom(testkit.Ctx(t), id, 0); len(after) != len(before) || (err != nil) != (len(before) == 0) {
					t.Fatalf("the child's log went from %d records to %d (%v): a child beyond the cap ran", len(before), len(after), err)
				}
			})
		}
	}
}

// parking is a child's model that, once armed, parks every request until
// its context ends, or answers "too late" after late: a child that runs
// past its parent's time budget.
type parking struct {
	*agenttest.Recorder
	armed atomic.Bool
	late  time.Duration
}

func (m *parking) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	resp, err := m.Recorder.Generate(ctx, req)
	if !m.armed.Load() {
		return resp, err
	}
	select {
	case <-ctx.Done():
		return agent.Response{}, context.Cause(ctx)
	case <-time.After(m.late):
		return final("too late"), nil
	}
}

// lastStop is the stop reason of the last stop record in session id's
// log, "" when it has none.
func lastStop(t *testing.T, store persistence.Store, id string) subagent.StopReason {
	t.Helper()
	_, log, err := store.LoadFrom(testkit.Ctx(t), id, 0)
	if err != nil {
		t.Fatalf("the log of %s: %v", id, err)
	}
	var reason subagent.StopReason
	for _, e := range log {
		var s agentlog.Stop
		if e.Kind == agentlog.KindStop && json.Unmarshal(e.Data, &s) == nil {
			reason = s.StopReason
		}
	}
	return reason
}

// Contract S9: the time budget of a delegating run (its context's
// deadline; the delegate tool has none of its own) applies to a recovered
// call as to a fresh one. A parent died while its child was running; it
// resumes under a budget, and the resumed child's model parks (as does
// that of a child that never started and now runs anew). The run is
// cut at the budget, not later, with the stop reason and cause a fresh
// delegation that parks gets, and its child stops as the fresh one does.
// In fake time (synctest): the budget passes only once everything waits.
func TestS9_ARecoveredCallIsCutAtItsRunsTimeBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse func(string, *subagent.SessionHeader, []persistence.Record) bool
		calls  int // the child's model calls: before the crash, and the parked one
	}{
		{"running", diedRunning, 3},
		{"never started", neverStarted, 1},
	} {
		t.Run(c.name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { cutAtBudget(t, c.refuse, c.calls) }) })
	}
}

// cutAtBudget is TestS9_ARecoveredCallIsCutAtItsRunsTimeBudget for a
// crash where refuse says, after which the child's model has been called
// calls times.
func cutAtBudget(t *testing.T, refuse func(string, *subagent.SessionHeader, []persistence.Record) bool, calls int) {
	const budget = 5 * time.Second
	m := &parking{Recorder: agenttest.NewRecorder(stepThenAnswer), late: 2 * budget}
	r := crashAt(t, 0, m.Recorder, m, refuse)
	m.armed.Store(true)
	freshModel := agenttest.NewRecorder(func(req agent.Request) agent.Response {
		if last := req.Messages[len(req.Messages)-1]; last.Role == agent.ToolRole {
			return final("fresh parent heard: " + subagent.TextOf(last.Content))
		}
		return callTool(delegate.DefaultName, `{"description":"a task","prompt":"a fresh task"}`)
	})
	fresh := r.env.agentAt(t, "fresh", 0, subagent.AgentOptions{}, freshModel, r.tool)
	t.Cleanup(fresh.Close)

	// run runs a under the budget: its result, and how long it took.
	run := func(a *agent.Agent, prompt []subagent.ContentBlock) (subagent.Result, time.Duration) {
		ctx, cancel := context.WithTimeout(testkit.Ctx(t), budget)
		defer cancel()
		start := time.Now()
		res := a.Run(ctx, prompt, nil)
		return res, time.Since(start)
	}
	want, took := run(fresh, text("delegate it"))
	if want.StopReason != subagent.Aborted || !errors.Is(want.Cause, context.DeadlineExceeded) || took != budget {
		t.Fatalf("a fresh delegation whose child parks stopped %s (%v) after %s, want aborted at the budget of %s", want.StopReason, want.Cause, took, budget)
	}
	wantChild := lastStop(t, r.store, childOf(t, r.store, "fresh"))
	if wantChild != subagent.Aborted {
		t.Fatalf("the fresh child's log ends with stop %q, want aborted", wantChild)
	}

	got, took := run(r.newParent(t, true), nil)
	if took != budget {
		t.Fatalf("the recovered call's run took %s, want its budget of %s: its child was not cut at it", took, budget)
	}
	if got.StopReason != want.StopReason || !errors.Is(got.Cause, context.DeadlineExceeded) || got.Detail != want.Detail {
		t.Fatalf("the recovered call's run stopped %s (%v): %s, want %s (%v): %s as fresh", got.StopReason, got.Cause, got.Detail, want.StopReason, want.Cause, want.Detail)
	}
	if n := len(m.Requests(childTask)); n != calls {
		t.Fatalf("the child's model was called %d times, want %d (the last one parked)", n, calls)
	}
	if gotChild := lastStop(t, r.store, r.childID(t)); gotChild != wantChild {
		t.Fatalf("the recovered child's log ends with stop %q, a fresh child's with %q", gotChild, wantChild)
	}
}
