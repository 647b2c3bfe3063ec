package acp_test

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract O3: an ACP child's session/new and session/prompt carry the
// run's W3C trace context at the root keys of _meta, so the agent's own
// spans join the delegating tree's trace under the run's span: the fake
// agent reports the traceparent and tracestate it received, which name
// the trace of the caller's span and the run span (a CLIENT span: the
// child is another process) as parent, and keep the caller's tracestate.
func TestO3_ACPChildReceivesTraceContextInMeta(t *testing.T) {
	exp := testkit.Tracing(t)

	sys := newSystem(t)
	svc := registry.New(sys)
	t.Cleanup(svc.Close)
	release, err := svc.RegisterProvider(newProvider(t, fakeConfig(t, sys, modeNormal)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)

	// The caller's span (a delegating tool call's, say), under a remote
	// parent whose tracestate the trace carries.
	state, err := trace.ParseTraceState("vendor=subactor")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(testkit.Ctx(t), remote)
	ctx, caller := otel.Tracer("test").Start(ctx, "execute_tool subagent")
	r, err := svc.Start(ctx, acp.DefaultName, request("meta"))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	must(t, r.Dispose(testkit.Ctx(t)))
	caller.End()
	if res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	var run sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "invoke_agent "+acp.DefaultName {
			run = s
		}
	}
	if run == nil {
		t.Fatal("no run span exported")
	}
	if run.SpanKind() != trace.SpanKindClient || run.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Fatalf("run span kind %s under %s, want a client span under the caller's %s", run.SpanKind(), run.Parent().SpanID(), caller.SpanContext().SpanID())
	}
	tpWant := fmt.Sprintf("00-%s-%s-01", remote.TraceID(), run.SpanContext().SpanID())
	want := fmt.Sprintf("meta:open=%s/vendor=subactor prompt=%s/vendor=subactor;", tpWant, tpWant)
	if got := subagent.TextOf(res.Output); got != want {
		t.Fatalf("the agent received\n%s\nwant\n%s", got, want)
	}
}

// Contract O3 (and O4): a run started with no span in its context sends
// no _meta trace keys at all.
func TestO3_NoTraceContextNoMeta(t *testing.T) {
	sys := newSystem(t)
	p := newProvider(t, fakeConfig(t, sys, modeNormal))
	r := start(t, testkit.Ctx(t), p, request("meta"))
	res := wait(t, r)
	if got, want := subagent.TextOf(res.Output), "meta:open=<nil>/<nil> prompt=<nil>/<nil>;"; got != want {
		t.Fatalf("the agent received %q, want %q", got, want)
	}
}
