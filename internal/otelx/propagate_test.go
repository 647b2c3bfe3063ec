package otelx_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/internal/otelx"
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
