// Package otelx is the runtime's OpenTelemetry instrumentation: one trace
// per delegation tree (O1) in the GenAI semantic conventions (O2), the W3C
// trace context carried across process and node boundaries (O3), and the
// GenAI metrics, all on the global tracer and meter providers
// (otel.SetTracerProvider, otel.SetMeterProvider), so that an embedder turns
// them on the way every OpenTelemetry library is turned on and the public
// API gains nothing.
//
// Off costs nothing (O4): until a provider is set, On and Metering are an
// atomic load and a comparison, and callers skip every span, attribute and
// context they would otherwise make. The global default provider is not
// used as a no-op: its tracer still allocates a context and a span per
// Start.
//
// Spans: invoke_agent {provider} per run (INTERNAL for an in-process
// child, CLIENT for one in another process or node), chat {model} per
// model call (CLIENT), execute_tool {tool} per tool call (INTERNAL). A
// child's run span is a child of the execute_tool span of the call that
// delegated it: the delegate tool passes its call's ctx to the Service.
// Prompt and output text are never recorded (they hold user data).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package otelx

import (
	"sync/atomic"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span and instrument.
const ScopeName = "github.com/subactor/subactor"

// The global delegating providers as they are before anyone sets one:
// comparing with them tells "not configured" without a call that
// allocates. Read at package init, before any main sets a provider.
var (
	unsetTP = otel.GetTracerProvider()
	unsetMP = otel.GetMeterProvider()
)

// On reports whether a tracer provider is configured (O4): the global
// one is neither the unset default nor a no-op.
func On() bool {
	tp := otel.GetTracerProvider()
	if tp == unsetTP {
		return false
	}
	_, noop := tp.(tracenoop.TracerProvider)
	return !noop
}

// Metering reports whether a meter provider is configured, as On does
// for traces.
func Metering() bool {
	mp := otel.GetMeterProvider()
	if mp == unsetMP {
		return false
	}
	_, noop := mp.(metricnoop.MeterProvider)
	return !noop
}

// Active reports whether traces or metrics are on: whether a run needs
// watching to its end.
func Active() bool { return On() || Metering() }

// cachedTracer is the runtime's tracer on the provider it came from.
type cachedTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

var lastTracer atomic.Pointer[cachedTracer]

// tracer is the runtime's tracer on the global provider, kept until
// another provider is set: asking the SDK's provider for it takes a lock
// and a map lookup a span.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := lastTracer.Load(); c != nil && sameTP(c.tp, tp) {
		return c.t
	}
	c := &cachedTracer{tp: tp, t: tp.Tracer(ScopeName)}
	lastTracer.Store(c)
	return c.t
}

// sameTP is same for tracer providers.
func sameTP(a, b trace.TracerProvider) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}
