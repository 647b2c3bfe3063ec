package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Trace export (O1-O3 leave the process through it) is configured the
// standard way, by the OpenTelemetry environment variables, and is off
// unless an OTLP endpoint is named: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. The exporters and the SDK read the
// rest themselves: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (grpc or
// http/protobuf, the default), _HEADERS, _TIMEOUT, _INSECURE,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// its _ARG, OTEL_BSP_* for the batch processor. OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none keep it off.

// defaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const defaultServiceName = "subactor-node"

// flushLimit bounds the flush at exit: a collector that does not answer
// delays the node's exit by this at most, never a run (spans are
// exported off the run's path, from a bounded queue).
const flushLimit = 3 * time.Second

// telemetry turns trace export on when getenv names an OTLP endpoint and
// returns what flushes and stops it (a no-op when off). Export failures
// are logged on logs once, with the count of spans they lost so far; the
// rest are counted and told at the flush.
func telemetry(ctx context.Context, getenv func(string) string, logs io.Writer) (flush func(), err error) {
	off := func() {}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return off, nil
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") || strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return off, nil
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	var exp sdktrace.SpanExporter
	// Retries off: a refused connection fails the export at once instead
	// of holding the flush at exit for the retry's minute; a batch a
	// collector did not take is lost, and counted.
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	default:
		return off, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: the node exports traces over grpc or http/protobuf", proto)
	}
	if err != nil {
		return off, fmt.Errorf("trace export: %w", err)
	}
	// Later detectors win: the environment's service name over ours.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return off, fmt.Errorf("trace export: %w", err)
	}
	counted := &countingExporter{SpanExporter: exp, logs: logs}
	// The batch processor's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2048 by default) and drops rather than blocks when full: a slow
	// collector never slows a run.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(counted), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	// The SDK's own errors (an export that failed) are counted above;
	// the rest go to the log once each kind.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { counted.warnOnce(err) }))
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushLimit)
		defer cancel()
		err := tp.Shutdown(fctx)
		if n := counted.lost.Load(); n > 0 || err != nil {
			fmt.Fprintf(logs, "%s: trace export: %d spans not exported%s\n", prog, n, errSuffix(err))
		}
	}, nil
}

// countingExporter counts the spans its exporter failed to send and
// logs the first failure.
type countingExporter struct {
	sdktrace.SpanExporter
	logs   io.Writer
	lost   atomic.Int64
	warned sync.Once
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.lost.Add(int64(len(spans)))
		e.warnOnce(err)
	}
	return err
}

func (e *countingExporter) warnOnce(err error) {
	e.warned.Do(func() {
		fmt.Fprintf(e.logs, "%s: warning: trace export failed, spans are being dropped (told once): %v\n", prog, err)
	})
}

func errSuffix(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf(" (the flush at exit gave up after %s)", flushLimit)
	}
	return ": " + err.Error()
}
