package otelx

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/subactor/subactor/subagent"
)

// Metric names: the GenAI conventions' client metrics and the runtime's
// own run counts.
const (
	MetricTokenUsage  = "gen_ai.client.token.usage"
	MetricDuration    = "gen_ai.client.operation.duration"
	MetricRunsStarted = "subactor.runs.started"
	MetricRunsEnded   = "subactor.runs.ended"
	MetricRunsLive    = "subactor.runs.live"
)

// instruments are the runtime's instruments on one meter provider.
type instruments struct {
	mp       metric.MeterProvider
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	started  metric.Int64Counter
	ended    metric.Int64Counter
	live     metric.Int64UpDownCounter
}

// current holds the instruments of the global meter provider last seen:
// made again only when another provider is set.
var current atomic.Pointer[instruments]

// get is the instruments of the global meter provider. Call it only when
// Metering.
func get() *instruments {
	provider := otel.GetMeterProvider()
	if in := current.Load(); in != nil && same(in.mp, provider) {
		return in
	}
	mp := provider.Meter(ScopeName)
	in := &instruments{mp: provider}
	// The bucket boundaries are the conventions' advice for each.
	in.tokens, _ = mp.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	in.duration, _ = mp.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	in.started, _ = mp.Int64Counter(MetricRunsStarted, metric.WithUnit("{run}"),
		metric.WithDescription("Runs started, by provider."))
	in.ended, _ = mp.Int64Counter(MetricRunsEnded, metric.WithUnit("{run}"),
		metric.WithDescription("Runs ended, by provider and stop reason."))
	in.live, _ = mp.Int64UpDownCounter(MetricRunsLive, metric.WithUnit("{run}"),
		metric.WithDescription("Runs started and not yet ended, by provider."))
	current.Store(in)
	return in
}

// RunStarted counts a published run of provider.
func RunStarted(ctx context.Context, provider string) {
	if !Metering() {
		return
	}
	in := get()
	set := metric.WithAttributes(SubProvider.String(provider))
	in.started.Add(ctx, 1, set)
	in.live.Add(ctx, 1, set)
}

// RunEnded counts a run of provider that settled with reason.
func RunEnded(ctx context.Context, provider string, reason subagent.StopReason) {
	if !Metering() {
		return
	}
	in := get()
	in.ended.Add(ctx, 1, metric.WithAttributes(SubProvider.String(provider), SubStopReason.String(string(reason))))
	in.live.Add(ctx, -1, metric.WithAttributes(SubProvider.String(provider)))
}

// recordChat records a model call's duration and, when it answered, its
// tokens.
func recordChat(ctx context.Context, c Chat, usage subagent.Usage, err error) {
	in := get()
	op, prov, model := OperationName.String(OpChat), ProviderName.String(c.provider), RequestModel.String(c.model)
	if err != nil {
		in.duration.Record(ctx, time.Since(c.begun).Seconds(), metric.WithAttributes(op, prov, model, ErrorType.String(errorType(err))))
		return
	}
	in.duration.Record(ctx, time.Since(c.begun).Seconds(), metric.WithAttributes(op, prov, model))
	in.tokens.Record(ctx, int64(usage.InputTokens), metric.WithAttributes(op, prov, model, TokenType.String("input")))
	in.tokens.Record(ctx, int64(usage.OutputTokens), metric.WithAttributes(op, prov, model, TokenType.String("output")))
}

// same reports whether a and b are one provider; a provider whose type
// cannot be compared is never the same (its instruments are made again).
func same(a, b metric.MeterProvider) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}
