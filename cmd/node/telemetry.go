package main

import (
	"cmp"
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
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Trace export (O1-O3 leave the process through it) and metric export
// (O2's GenAI metrics and the run counts) are configured the standard
// way, by the OpenTelemetry environment variables, and each is off
// unless an OTLP endpoint is named for it: OTEL_EXPORTER_OTLP_ENDPOINT,
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT. The
// exporters and the SDK read the rest themselves:
// OTEL_EXPORTER_OTLP_(TRACES_|METRICS_)PROTOCOL (grpc or http/protobuf,
// the default), _HEADERS, _TIMEOUT, _INSECURE, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and its _ARG, OTEL_BSP_*
// for the batch processor, OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT for
// the periodic reader. OTEL_SDK_DISABLED=true turns both off,
// OTEL_TRACES_EXPORTER=none and OTEL_METRICS_EXPORTER=none each.

// defaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const defaultServiceName = "subactor-node"

// flushLimit bounds the flush at exit: a collector that does not answer
// delays the node's exit by this at most, never a run (spans are
// exported off the run's path, from a bounded queue, and metrics are
// aggregated in memory and exported by a reader of their own).
const flushLimit = 3 * time.Second

// exporting reports whether getenv asks for export of a kind of
// telemetry (TRACES or METRICS, as the OTEL_* variables name it), and
// over which OTLP protocol.
func exporting(getenv func(string) string, kind string) (proto string, on bool) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+kind+"_ENDPOINT") == "" {
		return "", false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") || strings.TrimSpace(getenv("OTEL_"+kind+"_EXPORTER")) == "none" {
		return "", false
	}
	return cmp.Or(strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_"+kind+"_PROTOCOL")), strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))), true
}

// exportPart is one kind's provider as the flush at exit sees it: what
// stops it (flushing what it holds), and what tells its losses.
type exportPart struct {
	stop   func(context.Context) error
	report func(error)
}

// telemetry turns trace and metric export on as getenv asks and returns
// what flushes and stops them (a no-op when both are off). Export
// failures are logged on logs once for each kind, with the count of
// what they lost so far; the rest are counted and told at the flush. A
// kind whose exporter cannot be made is off, with an error saying why;
// the other kind works all the same.
func telemetry(ctx context.Context, getenv func(string) string, logs io.Writer) (flush func(), err error) {
	traceProto, tracing := exporting(getenv, "TRACES")
	metricProto, metering := exporting(getenv, "METRICS")
	if !tracing && !metering {
		return func() {}, nil
	}
	// Later detectors win: the environment's service name over ours.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return func() {}, fmt.Errorf("telemetry: %w", err)
	}
	var spans *countingExporter
	var parts []exportPart
	var errs []error
	if tracing {
		var tp *sdktrace.TracerProvider
		if spans, tp, err = traceExport(ctx, traceProto, res, logs); err != nil {
			errs = append(errs, err)
		} else {
			otel.SetTracerProvider(tp)
			parts = append(parts, exportPart{tp.Shutdown, spans.report})
		}
	}
	if metering {
		m, mp, err := metricExport(ctx, metricProto, res, logs)
		if err != nil {
			errs = append(errs, err)
		} else {
			otel.SetMeterProvider(mp)
			parts = append(parts, exportPart{mp.Shutdown, m.report})
		}
	}
	// The SDK's own errors (an export that failed) are counted by the
	// exporters; the rest go to the log once.
	var others sync.Once
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		var told metricExportError
		switch {
		case errors.As(err, &told):
		case spans != nil:
			spans.warnOnce(err)
		default:
			others.Do(func() { fmt.Fprintf(logs, "%s: warning: telemetry (told once): %v\n", prog, err) })
		}
	}))
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushLimit)
		defer cancel()
		// Together: the exit waits flushLimit at most, not once a kind.
		errs := make([]error, len(parts))
		var wg sync.WaitGroup
		for i, p := range parts {
			wg.Go(func() { errs[i] = p.stop(fctx) })
		}
		wg.Wait()
		for i, p := range parts {
			p.report(errs[i])
		}
	}, errors.Join(errs...)
}

// traceExport is the tracer provider exporting over proto, through a
// batch processor.
func traceExport(ctx context.Context, proto string, res *resource.Resource, logs io.Writer) (*countingExporter, *sdktrace.TracerProvider, error) {
	var exp sdktrace.SpanExporter
	var err error
	// Retries off: a refused connection fails the export at once instead
	// of holding the flush at exit for the retry's minute; a batch a
	// collector did not take is lost, and counted.
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	default:
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: the node exports traces over grpc or http/protobuf; traces are not exported", proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("trace export: %w; traces are not exported", err)
	}
	counted := &countingExporter{SpanExporter: exp, logs: logs}
	// The batch processor's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2048 by default) and drops rather than blocks when full: a slow
	// collector never slows a run.
	return counted, sdktrace.NewTracerProvider(sdktrace.WithBatcher(counted), sdktrace.WithResource(res)), nil
}

// metricExport is the meter provider exporting over proto, through a
// periodic reader: instruments aggregate in memory, and the reader
// exports from a goroutine of its own, so a run never waits for a
// collector.
func metricExport(ctx context.Context, proto string, res *resource.Resource, logs io.Writer) (*countingMetrics, *sdkmetric.MeterProvider, error) {
	var exp sdkmetric.Exporter
	var err error
	// Retries off, as for traces.
	switch proto {
	case "", "http/protobuf":
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	case "grpc":
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}))
	default:
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: the node exports metrics over grpc or http/protobuf; metrics are not exported", proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("metric export: %w; metrics are not exported", err)
	}
	counted := &countingMetrics{Exporter: exp, logs: logs}
	return counted, sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(counted)), sdkmetric.WithResource(res)), nil
}

// countingMetrics counts the exports its exporter failed and logs the
// first failure; the error it returns is marked as told
// (metricExportError), so the error handler does not tell it again.
type countingMetrics struct {
	sdkmetric.Exporter
	logs   io.Writer
	lost   atomic.Int64
	warned sync.Once
}

type metricExportError struct{ error }

func (e metricExportError) Unwrap() error { return e.error }

func (e *countingMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	if err != nil {
		e.lost.Add(1)
		e.warnOnce(err)
		return metricExportError{err}
	}
	return nil
}

// report tells, at exit, how many exports failed and how the last one
// (the flush) ended, when either is worth telling.
func (e *countingMetrics) report(err error) {
	if n := e.lost.Load(); n > 0 || err != nil {
		fmt.Fprintf(e.logs, "%s: metric export: %d exports failed%s\n", prog, n, errSuffix(err))
	}
}

func (e *countingMetrics) warnOnce(err error) {
	e.warned.Do(func() {
		fmt.Fprintf(e.logs, "%s: warning: metric export failed, metrics are being dropped (told once): %v\n", prog, err)
	})
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

// report is countingMetrics.report for spans.
func (e *countingExporter) report(err error) {
	if n := e.lost.Load(); n > 0 || err != nil {
		fmt.Fprintf(e.logs, "%s: trace export: %d spans not exported%s\n", prog, n, errSuffix(err))
	}
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
