package otelx_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/testkit"
)

// Contract O3: the helpers a wire message's traceparent field is filled
// and read with round-trip a span context (trace id, span id, sampling,
// tracestate) and ignore what is not one (K3: hostile input).
func TestO3_InjectAndExtractRoundTrip(t *testing.T) {
	state, _ := trace.ParseTraceState("a=1,b=2")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2},
		TraceFlags: trace.FlagsSampled, TraceState: state,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	tp, ts := otelx.Inject(ctx)
	if tp != "00-ab010000000000000000000000000000-cd02000000000000-01" || ts != "a=1,b=2" {
		t.Fatalf("Inject: %q %q", tp, ts)
	}
	got := trace.SpanContextFromContext(otelx.Extract(context.Background(), tp, ts))
	if !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || got.TraceState().String() != "a=1,b=2" {
		t.Fatalf("Extract: %+v", got)
	}
	meta := otelx.Meta(ctx, map[string]any{"other": 1})
	if meta["traceparent"] != tp || meta["tracestate"] != ts || meta["other"] != 1 {
		t.Fatalf("Meta: %v", meta)
	}
	if got := trace.SpanContextFromContext(otelx.FromMeta(context.Background(), meta)); got.TraceID() != sc.TraceID() {
		t.Fatalf("FromMeta: %+v", got)
	}
	if otelx.Meta(context.Background(), nil) != nil {
		t.Fatal("Meta of a context without a span is not nil")
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "ff-ab010000000000000000000000000000-cd02000000000000-01"} {
		if got := trace.SpanContextFromContext(otelx.Extract(context.Background(), bad, "x")); got.IsValid() {
			t.Errorf("Extract(%q) gave a valid span context %+v", bad, got)
		}
	}
	if got := otelx.FromMeta(context.Background(), map[string]any{"traceparent": 42}); trace.SpanContextFromContext(got).IsValid() {
		t.Error("FromMeta took a traceparent that is not a string")
	}
}

// Contract O3 across nodes, as the cluster's host is to use the helpers:
// the caller injects its run span into the start message's traceparent,
// the hosting node extracts it and starts its side of the run as a
// SERVER span under the caller's, in the caller's trace.
func TestO3_HostedRunContinuesTheCallersTrace(t *testing.T) {
	exp := testkit.Tracing(t)
	callerCtx, caller := otelx.StartRun(context.Background(), otelx.Run{Provider: "remote", Client: true})
	traceparent, tracestate := otelx.Inject(callerCtx)
	hostCtx := otelx.Extract(context.Background(), traceparent, tracestate)
	_, hosted := otelx.StartRun(hostCtx, otelx.Run{Provider: "spawn", Server: true})
	hosted.End()
	caller.End()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	h, c := spans[0], spans[1]
	if h.SpanKind != trace.SpanKindServer || c.SpanKind != trace.SpanKindClient {
		t.Fatalf("kinds %s and %s, want server and client", h.SpanKind, c.SpanKind)
	}
	if h.SpanContext.TraceID() != c.SpanContext.TraceID() || h.Parent.SpanID() != c.SpanContext.SpanID() || !h.Parent.IsRemote() {
		t.Fatalf("hosted span %v under %v, want under the caller's %v", h.SpanContext, h.Parent, c.SpanContext)
	}
}

// Contract O2 with K3: a tool call's name and id are model output: a
// huge one is cut in the span, and many distinct ones do not grow the
// span-name cache without bound.
func TestO2_HostileToolNamesAreBounded(t *testing.T) {
	exp := testkit.Tracing(t)
	huge := strings.Repeat("é", 10_000)
	for i := range 1000 {
		_, span := otelx.StartTool(context.Background(), huge+strconv.Itoa(i), huge)
		otelx.EndTool(span, true)
	}
	for _, s := range exp.GetSpans() {
		if len(s.Name) > 200 || !utf8.ValidString(s.Name) {
			t.Fatalf("span name of %d bytes (valid UTF-8 %v)", len(s.Name), utf8.ValidString(s.Name))
		}
		for _, kv := range s.Attributes {
			if len(kv.Value.Emit()) > 200 {
				t.Fatalf("attribute %s of %d bytes", kv.Key, len(kv.Value.Emit()))
			}
		}
	}
}
