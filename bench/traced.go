package bench

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// SubactorParentRunTraced is SubactorParentRun with tracing on (O1, O2):
// an SDK tracer provider sampling every span and handing each, as it
// ends, to an in-memory exporter (emptied after every run), set as the
// global provider for the op's life. Ops are measured one at a time, so
// no other op runs under it; done restores the provider it found.
func SubactorParentRunTraced(ctx context.Context) (func() error, func(), error) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	restore := func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.WithoutCancel(ctx))
	}
	do, done, err := SubactorParentRun(ctx)
	if err != nil {
		restore()
		return nil, nil, err
	}
	checked := false
	return func() error {
			err := do()
			if !checked && err == nil {
				// Once: that the spans are made (a parent's run, its
				// model calls, the tool call, the child's run and calls).
				checked = true
				if n := len(exp.GetSpans()); n < 5 {
					err = errors.New("tracing on, but the run made too few spans")
				}
			}
			exp.Reset()
			return err
		}, func() {
			done()
			restore()
		}, nil
}
