package otelx_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/delegatetest"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// withMetrics is testkit.Tracing for metrics, read by hand.
func withMetrics(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})
	return r
}

// tree is a Service with a spawn provider on the scripted model whose
// children can delegate again, and a top-level parent agent with the
// same delegate tool.
type tree struct {
	svc    *registry.Service
	parent *agent.Agent
}

func newTree(t *testing.T) *tree {
	t.Helper()
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	store := persistence.NewMemory()
	f := delegatetest.Follow(svc)
	tool := delegate.New(delegate.Config{Service: f, Provider: spawn.DefaultName})
	t.Cleanup(tool.Close)
	p, err := spawn.New(spawn.Config{System: sys, Store: store, Model: scripted.New(), Tools: []agent.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	f.Await(t, subagent.ProviderAdded{Provider: spawn.DefaultName})
	parent, err := agent.New(t.Context(), agent.Config{
		Store: store, Model: scripted.New(), Tools: []agent.Tool{tool},
		Header: subagent.SessionHeader{SessionID: "top"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &tree{svc: svc, parent: parent}
}

// run runs the parent on prompt and requires it to complete.
func (tr *tree) run(t *testing.T, prompt string) subagent.Result {
	t.Helper()
	res := tr.parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text(prompt)}, nil)
	if res.StopReason != subagent.Completed {
		t.Fatalf("parent stopped %s: %s", res.StopReason, res.Detail)
	}
	return res
}

// The tree every test here runs: the parent delegates to two children in
// one turn, the first of which delegates to a grandchild.
const treePrompt = "fanout delegate echo from the grandchild | echo from the second child"

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func str(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	v, _ := attr(s, k)
	return v.AsString()
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Contracts O1 and O2: a parent that delegates to two children, one of
// which delegates to a grandchild, on the scripted model, is one trace:
// the parent's run span is its root; every chat and execute_tool span is
// under the run span of the agent that made it; every child's run span
// is under the execute_tool span of the call that delegated it; the spans
// carry the GenAI attributes, usage on every chat span, and the run
// events as span events.
func TestO1_O2_DelegationTreeIsOneTraceWithGenAIAttributes(t *testing.T) {
	exp := testkit.Tracing(t)
	tr := newTree(t)
	tr.run(t, treePrompt)
	spans := exp.GetSpans().Snapshots()
	if len(spans) == 0 {
		t.Fatal("no spans exported")
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	traceID := spans[0].SpanContext().TraceID()
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, not %s (O1: one trace per tree)", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	parentOf := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
		return byID[s.Parent().SpanID()] // nil for the root
	}
	// The run span a span belongs to: its nearest invoke_agent ancestor.
	runOf := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
		for p := parentOf(s); p != nil; p = parentOf(p) {
			if str(p, otelx.OperationName) == otelx.OpInvokeAgent {
				return p
			}
		}
		return nil
	}
	var roots, runs, chats, tools []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if !s.Parent().IsValid() {
			roots = append(roots, s)
		}
		switch op := str(s, otelx.OperationName); op {
		case otelx.OpInvokeAgent:
			runs = append(runs, s)
		case otelx.OpChat:
			chats = append(chats, s)
		case otelx.OpExecuteTool:
			tools = append(tools, s)
		default:
			t.Errorf("span %q has gen_ai.operation.name %q", s.Name(), op)
		}
	}
	if len(roots) != 1 || str(roots[0], otelx.OperationName) != otelx.OpInvokeAgent || str(roots[0], otelx.ConversationID) != "top" {
		t.Fatalf("want one root, the parent's invoke_agent span of session top; roots %v", names(roots))
	}
	root := roots[0]
	if len(runs) != 4 {
		t.Fatalf("%d invoke_agent spans, want 4 (parent, two children, a grandchild): %v", len(runs), names(runs))
	}
	// Children: each under an execute_tool span of the subagent tool,
	// itself under its delegating agent's run span.
	rootID := root.SpanContext().SpanID()
	isRoot := func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID() == rootID }
	for _, r := range runs {
		if isRoot(r) {
			continue
		}
		call := parentOf(r)
		if call == nil || str(call, otelx.OperationName) != otelx.OpExecuteTool || str(call, otelx.ToolName) != "subagent" {
			t.Fatalf("run span %q (agent %s) is not under a subagent execute_tool span", r.Name(), str(r, otelx.AgentID))
		}
		if r.SpanKind() != trace.SpanKindInternal {
			t.Errorf("an in-process child's run span is %s, want internal", r.SpanKind())
		}
		if r.Name() != "invoke_agent "+spawn.DefaultName || str(r, otelx.SubProvider) != spawn.DefaultName || str(r, otelx.AgentName) != spawn.DefaultName {
			t.Errorf("run span %q: provider attributes %v", r.Name(), r.Attributes())
		}
		if id := str(r, otelx.AgentID); id == "" || str(r, otelx.ConversationID) != id {
			t.Errorf("run span %q: gen_ai.agent.id %q, gen_ai.conversation.id %q: a fresh spawn child's session is its run", r.Name(), id, str(r, otelx.ConversationID))
		}
		if str(r, otelx.SubStopReason) != string(subagent.Completed) {
			t.Errorf("run span %q: stop reason %q", r.Name(), str(r, otelx.SubStopReason))
		}
		if v, ok := attr(r, otelx.InputTokens); !ok || v.AsInt64() <= 0 {
			t.Errorf("run span %q: no usage", r.Name())
		}
		if !hasEvent(r, otelx.EventStart) || !hasEvent(r, otelx.EventEnd) {
			t.Errorf("run span %q lacks the subagent/start and subagent/end events: %v", r.Name(), r.Events())
		}
		owner := runOf(r)
		if owner == nil {
			t.Fatalf("run span %q has no run above it", r.Name())
		}
		if str(r, otelx.SubParentSession) != str(owner, otelx.ConversationID) {
			t.Errorf("run span %q: parent session %q, but it is under the run of session %q", r.Name(), str(r, otelx.SubParentSession), str(owner, otelx.ConversationID))
		}
	}
	// Depths: 2 children of the root, 1 grandchild under a child.
	var children, grandchildren int
	for _, r := range runs {
		if isRoot(r) {
			continue
		}
		d := 0
		for p := runOf(r); p != nil; p = runOf(p) {
			d++
		}
		switch d {
		case 1:
			children++
		case 2:
			grandchildren++
		}
		if v, _ := attr(r, otelx.SubDepth); v.AsInt64() != int64(d) {
			t.Errorf("run span %q: subactor.depth %d, want %d", r.Name(), v.AsInt64(), d)
		}
	}
	if children != 2 || grandchildren != 1 {
		t.Fatalf("%d children and %d grandchildren, want 2 and 1", children, grandchildren)
	}
	// Every model call: under its agent's run span, with usage.
	perRun := map[trace.SpanID]int{}
	for _, c := range chats {
		r := runOf(c)
		if r == nil || c.Parent().SpanID() != r.SpanContext().SpanID() {
			t.Fatalf("chat span %q is not directly under a run span", c.Name())
		}
		perRun[r.SpanContext().SpanID()]++
		if c.Name() != "chat scripted" || c.SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span %q kind %s", c.Name(), c.SpanKind())
		}
		if str(c, otelx.ProviderName) != "subactor.scripted" || str(c, otelx.RequestModel) != "scripted" || str(c, otelx.ResponseModel) != "scripted" {
			t.Errorf("chat span model attributes %v", c.Attributes())
		}
		if str(c, otelx.ConversationID) != str(r, otelx.ConversationID) {
			t.Errorf("chat span of session %q under the run of session %q", str(c, otelx.ConversationID), str(r, otelx.ConversationID))
		}
		in, okIn := attr(c, otelx.InputTokens)
		out, okOut := attr(c, otelx.OutputTokens)
		if !okIn || !okOut || in.AsInt64() <= 0 || out.AsInt64() <= 0 {
			t.Errorf("chat span %q of session %q: usage in=%v out=%v", c.Name(), str(c, otelx.ConversationID), in.AsInt64(), out.AsInt64())
		}
	}
	for _, r := range runs {
		// A delegating agent asks twice (delegate, then answer); the
		// grandchild and the second child once.
		if perRun[r.SpanContext().SpanID()] == 0 {
			t.Errorf("run span %q has no chat span", r.Name())
		}
	}
	if len(tools) != 3 {
		t.Errorf("%d execute_tool spans, want 3 (the parent's two delegations and the first child's)", len(tools))
	}
	for _, c := range tools {
		if str(c, otelx.ToolCallID) == "" || c.Name() != "execute_tool subagent" {
			t.Errorf("execute_tool span %q: %v", c.Name(), c.Attributes())
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+"("+s.SpanContext().SpanID().String()+")")
	}
	return out
}

// Contract O2: the GenAI client metrics and the run counts: a token
// usage and a duration per model call, runs started and ended by
// provider and stop reason, and no run live once the tree is done.
func TestO2_MetricsCountModelCallsAndRuns(t *testing.T) {
	r := withMetrics(t)
	tr := newTree(t)
	tr.run(t, treePrompt)
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelx.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	// Model calls: two for each delegating agent (parent, first child),
	// one for each other (second child, grandchild).
	const calls = 6
	dur, ok := got[otelx.MetricDuration].(metricdata.Histogram[float64])
	if !ok || len(dur.DataPoints) != 1 || dur.DataPoints[0].Count != calls {
		t.Errorf("%s: %+v, want one series of %d calls", otelx.MetricDuration, got[otelx.MetricDuration], calls)
	}
	tok, ok := got[otelx.MetricTokenUsage].(metricdata.Histogram[int64])
	if !ok || len(tok.DataPoints) != 2 {
		t.Fatalf("%s: %+v, want an input and an output series", otelx.MetricTokenUsage, got[otelx.MetricTokenUsage])
	}
	for _, dp := range tok.DataPoints {
		typ, _ := dp.Attributes.Value(otelx.TokenType)
		if dp.Count != calls || dp.Sum <= 0 {
			t.Errorf("%s %s: %d records summing %d, want %d with tokens", otelx.MetricTokenUsage, typ.AsString(), dp.Count, dp.Sum, calls)
		}
	}
	sum := func(name string) (total int64, series []attribute.Set) {
		s, ok := got[name].(metricdata.Sum[int64])
		if !ok {
			t.Fatalf("%s: %+v", name, got[name])
		}
		for _, dp := range s.DataPoints {
			total += dp.Value
			series = append(series, dp.Attributes)
		}
		return total, series
	}
	if n, _ := sum(otelx.MetricRunsStarted); n != 3 {
		t.Errorf("%d runs started, want 3", n)
	}
	n, series := sum(otelx.MetricRunsEnded)
	if n != 3 || len(series) != 1 {
		t.Errorf("%d runs ended in %d series, want 3 in one", n, len(series))
	}
	for _, s := range series {
		p, _ := s.Value(otelx.SubProvider)
		reason, _ := s.Value(otelx.SubStopReason)
		if p.AsString() != spawn.DefaultName || reason.AsString() != string(subagent.Completed) {
			t.Errorf("runs ended series %s", s.Encoded(attribute.DefaultEncoder()))
		}
	}
	if n, _ := sum(otelx.MetricRunsLive); n != 0 {
		t.Errorf("%d runs live after the tree is done", n)
	}
}

// Contract O4: with no provider set (the global default) or a no-op one,
// tracing and metrics are off, and telling so allocates nothing: it is
// all a delegation pays for them (bench's allocation goals pin the
// delegation's own count, TestAllocationGoals).
func TestO4_OffUntilAProviderIsSetAndAllocatesNothing(t *testing.T) {
	off := func(when string) {
		t.Helper()
		if otelx.On() || otelx.Metering() || otelx.Active() {
			t.Fatalf("on %s", when)
		}
		if n := testing.AllocsPerRun(100, func() { _ = otelx.On() || otelx.Active() }); n != 0 {
			t.Fatalf("%s: telling tracing is off allocates %.0f times", when, n)
		}
	}
	off("before any provider was set")
	prevT, prevM := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	otel.SetMeterProvider(metricnoop.NewMeterProvider())
	t.Cleanup(func() {
		otel.SetTracerProvider(prevT)
		otel.SetMeterProvider(prevM)
	})
	off("with no-op providers set")
	if tp, ts := otelx.Inject(context.Background()); tp != "" || ts != "" {
		t.Fatalf("a context with no span injects %q %q", tp, ts)
	}
	if !strings.HasPrefix(otelx.ScopeName, "github.com/subactor/subactor") {
		t.Fatal(otelx.ScopeName)
	}
}
