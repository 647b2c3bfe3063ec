package testkit

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/subactor/subactor/internal/otelx"
)

// Tracing sets an always-sampling SDK tracer provider that exports every
// span as it ends to an in-memory exporter, for one test; the global
// provider is restored after it. Tests that set global providers do not
// run in parallel.
func Tracing(t testing.TB) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	if !otelx.On() {
		t.Fatal("a set SDK provider does not turn tracing on")
	}
	return exp
}
