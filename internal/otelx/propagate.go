package otelx

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C is the one propagation format the runtime speaks across process
// and node boundaries (O3), whatever global propagator an embedder set:
// the cluster's wire and ACP's _meta both carry W3C trace context.
var w3c propagation.TraceContext

// The W3C header names, which are also the root keys of an ACP or MCP
// request's _meta.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Inject is ctx's span context as a W3C traceparent and tracestate (O3);
// both empty when ctx carries no valid span context. For a wire message's
// traceparent field (messages.RemoteStart.Traceparent).
func Inject(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c[TraceParent], c[TraceState]
}

// Extract is ctx carrying, as its remote parent, the span context a W3C
// traceparent and tracestate name (O3); ctx as it is when traceparent is
// empty or malformed (hostile input is ignored, never trusted, K3).
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	c := propagation.MapCarrier{TraceParent: traceparent}
	if tracestate != "" {
		c[TraceState] = tracestate
	}
	return w3c.Extract(ctx, c)
}

// Meta is an ACP (or MCP) request's _meta carrying ctx's span context at
// its root keys (O3), or nil when ctx carries none; merged into meta when
// meta is not nil.
func Meta(ctx context.Context, meta map[string]any) map[string]any {
	tp, ts := Inject(ctx)
	if tp == "" {
		return meta
	}
	if meta == nil {
		meta = make(map[string]any, 2)
	}
	meta[TraceParent] = tp
	if ts != "" {
		meta[TraceState] = ts
	}
	return meta
}

// FromMeta is Extract from an ACP or MCP request's _meta.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[TraceParent].(string)
	ts, _ := meta[TraceState].(string)
	return Extract(ctx, tp, ts)
}

// TraceParentLen is the length of a W3C traceparent (version 00).
const TraceParentLen = 55

// AppendTraceParent appends to b the W3C traceparent of the span ctx
// carries while it records (what an activation record keeps of its run
// span, agentlog.Traced), without Inject's carrier map; b as it is and
// false when the span does not record.
func AppendTraceParent(b []byte, ctx context.Context) ([]byte, bool) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return b, false
	}
	sc := span.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(sc.TraceFlags())}), true
}

// Earlier is the link to the run span of an earlier activation that a
// traceparent names (O3); false when it is empty or malformed.
func Earlier(traceparent string) (trace.Link, bool) {
	sc := trace.SpanContextFromContext(Extract(context.Background(), traceparent, ""))
	return trace.Link{SpanContext: sc}, sc.IsValid()
}

// LinkEarlier links the run span ctx carries, while it records, to the
// run span of an earlier activation that traceparent names (O3).
func LinkEarlier(ctx context.Context, traceparent string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if l, ok := Earlier(traceparent); ok {
		span.AddLink(l)
	}
}
