package otelx

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/subagent"
)

// Attribute keys: the GenAI semantic conventions' (semconv v1.37, the
// gen_ai.* registry) and the runtime's own under subactor.
const (
	OperationName  = attribute.Key("gen_ai.operation.name")
	ProviderName   = attribute.Key("gen_ai.provider.name")
	RequestModel   = attribute.Key("gen_ai.request.model")
	ResponseModel  = attribute.Key("gen_ai.response.model")
	InputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	OutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	ConversationID = attribute.Key("gen_ai.conversation.id")
	AgentID        = attribute.Key("gen_ai.agent.id")
	AgentName      = attribute.Key("gen_ai.agent.name")
	ToolName       = attribute.Key("gen_ai.tool.name")
	ToolCallID     = attribute.Key("gen_ai.tool.call.id")
	TokenType      = attribute.Key("gen_ai.token.type")
	ErrorType      = attribute.Key("error.type")

	SubProvider      = attribute.Key("subactor.provider")
	SubDepth         = attribute.Key("subactor.depth")
	SubStopReason    = attribute.Key("subactor.stop_reason")
	SubParentSession = attribute.Key("subactor.parent_session")
	SubResumedFrom   = attribute.Key("subactor.resumed_from")
	SubSteerAdmitted = attribute.Key("subactor.steer.admitted")
	SubLocal         = attribute.Key("subactor.local")
)

// Operation names (gen_ai.operation.name).
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// TopAgent is gen_ai.agent.name of an agent its embedder runs itself.
const TopAgent = "top"

// Event names: the Service's run events, as span events of the run span.
const (
	EventStart = "subagent/start"
	EventEnd   = "subagent/end"
	EventSteer = "subagent/steer"
)

// OutOfProcess is a Provider whose children run in another process or on
// another node: their run spans are CLIENT spans, not INTERNAL ones. The
// method is on the providers' unexported types, so it adds nothing to the
// public API.
type OutOfProcess interface {
	OutOfProcess() bool
}

// The span kinds as start options, made once: an option made per span
// is an allocation per span.
var spanKinds = [...]trace.SpanStartOption{
	internal: trace.WithSpanKind(trace.SpanKindInternal),
	client:   trace.WithSpanKind(trace.SpanKindClient),
	server:   trace.WithSpanKind(trace.SpanKindServer),
}

// Indices of spanKinds and spanKind.opts.
const (
	internal = iota
	client
	server
)

// kinds holds, by operation, subject and provider ("chat", "scripted",
// "subactor.scripted"), a span's name and its start options: its kind
// and the attributes a sampler may read (the conventions ask for them at
// creation), which are the same for every span of the kind, made once
// each: a handful of models, tools and providers. A tool name is model
// output (K3): the cache stops growing at maxNames, and names are cut at
// nameLimit bytes. The other attributes wait for the span's end (see
// Ended), where it takes them in one SetAttributes with its result: an
// exporter reads a span only once it ended, and every SetAttributes
// after the first grows the span's attribute slice again.
var (
	kinds     sync.Map // [3]string → *spanKind
	kindCount atomic.Int32
)

const (
	maxNames  = 256
	nameLimit = 128
)

type spanKind struct {
	name string
	// opts are a span's start options by span kind (internal, client,
	// server): its kind and its attributes, made once (none for a tool
	// call's). Options passed one by one through the Tracer interface
	// are a slice made per span.
	opts [3][]trace.SpanStartOption
}

func kindOf(op, subject, provider string) *spanKind {
	key := [3]string{op, subject, provider}
	if k, ok := kinds.Load(key); ok {
		return k.(*spanKind)
	}
	k := &spanKind{name: op}
	if subject != "" {
		k.name = op + " " + limit(subject)
	}
	attrs := []attribute.KeyValue{OperationName.String(op)}
	switch op {
	case OpInvokeAgent:
		attrs = append(attrs, AgentName.String(limit(subject)))
		if provider != "" {
			attrs = append(attrs, SubProvider.String(provider))
		}
	case OpChat:
		attrs = append(attrs, ProviderName.String(provider))
		if subject != "" {
			attrs = append(attrs, RequestModel.String(subject))
		}
	case OpExecuteTool:
		// A tool call's span takes its attributes at its start, with its
		// call id (see StartTool): its kind is a name.
		attrs = nil
	}
	if attrs != nil {
		start := trace.WithAttributes(attrs...)
		for i, kind := range spanKinds {
			k.opts[i] = []trace.SpanStartOption{kind, start}
		}
	}
	if kindCount.Add(1) <= maxNames {
		kinds.Store(key, k)
	}
	return k
}

// limit cuts s to nameLimit bytes, on a rune boundary.
func limit(s string) string {
	if len(s) <= nameLimit {
		return s
	}
	n := nameLimit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Run describes a run span at its start.
type Run struct {
	Provider string // the provider's registered name
	Client   bool   // the child runs in another process or node
	// Server marks the hosting node's side of a run another node
	// started (its ctx from Extract of the start message's traceparent).
	Server        bool
	ResumedFrom   string
	ModelProvider string // the requested model provider and model, when named
	Model         string
}

// StartRun starts the run span invoke_agent {provider} under ctx's span
// (the delegating tool call's, O1); EndRun ends it. Call it only when On.
func StartRun(ctx context.Context, r Run) (context.Context, trace.Span) {
	kind := internal
	switch {
	case r.Client:
		kind = client
	case r.Server:
		kind = server
	}
	k := kindOf(OpInvokeAgent, r.Provider, r.Provider)
	opts := k.opts[kind]
	if r.ModelProvider == "" && r.Model == "" && r.ResumedFrom == "" {
		return tracer().Start(ctx, k.name, opts...)
	}
	var attrs []attribute.KeyValue
	if r.ModelProvider != "" {
		attrs = append(attrs, ProviderName.String(r.ModelProvider))
	}
	if r.Model != "" {
		attrs = append(attrs, RequestModel.String(r.Model))
	}
	if r.ResumedFrom != "" {
		attrs = append(attrs, SubResumedFrom.String(r.ResumedFrom))
	}
	return tracer().Start(ctx, k.name, append(opts[:len(opts):len(opts)], trace.WithAttributes(attrs...))...)
}

// StartRoot starts the run span of an agent its embedder runs itself (a
// top-level agent), under ctx's span if any, so that its tree is one
// trace (O1), linked to the run span earlier names, if any: the session's
// earlier run, in this process or before a restart (O3). EndRun ends
// it. Call it only when On.
func StartRoot(ctx context.Context, earlier string) (context.Context, trace.Span) {
	// Named by its role, not its id: span names are for grouping.
	k := kindOf(OpInvokeAgent, TopAgent, "")
	opts := k.opts[internal]
	if l, ok := Earlier(earlier); ok {
		return tracer().Start(ctx, k.name, append(opts[:len(opts):len(opts)], trace.WithLinks(l))...)
	}
	return tracer().Start(ctx, k.name, opts...)
}

// Published records on a run span the subagent/start event: its child
// exists (where, Ended says).
func Published(span trace.Span) {
	if span == nil || !span.IsRecording() {
		return
	}
	span.AddEvent(EventStart)
}

// SteerRefused records a steer the run refused on its span, while it is
// live (an ended span takes no event).
func SteerRefused(span trace.Span) {
	if span == nil || !span.IsRecording() {
		return
	}
	span.AddEvent(EventSteer, steerRefused)
}

// SteersAdmitted records n steers the agent running under ctx took into
// its next model request, as events of the run span ctx carries.
func SteersAdmitted(ctx context.Context, n int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	for range n {
		span.AddEvent(EventSteer, steerAdmitted)
	}
}

// The steer events' attributes, made once.
var (
	steerAdmitted = trace.WithAttributes(SubSteerAdmitted.Bool(true))
	steerRefused  = trace.WithAttributes(SubSteerAdmitted.Bool(false))
)

// Ended is what a run span records as it ends, besides its result:
// the attributes no sampler needs (see kinds).
type Ended struct {
	RunID         string // gen_ai.agent.id
	SessionID     string // gen_ai.conversation.id, when known
	ParentSession string
	Depth         int // subactor.depth: the run's agent's
	// Published says the run was published, and Local where its child
	// runs (subactor.local).
	Published, Local bool
}

// attrs appends e's attributes to buf.
func (e Ended) attrs(buf []attribute.KeyValue) []attribute.KeyValue {
	buf = append(buf, AgentID.String(e.RunID), SubDepth.Int(e.Depth))
	if e.ParentSession != "" {
		buf = append(buf, SubParentSession.String(e.ParentSession))
	}
	if e.SessionID != "" {
		buf = append(buf, ConversationID.String(e.SessionID))
	}
	if e.Published {
		buf = append(buf, SubLocal.Bool(e.Local))
	}
	return buf
}

// EndRun ends a run span with e and its result: usage, stop reason, the
// subagent/end event, and an error status unless it completed.
func EndRun(span trace.Span, e Ended, res subagent.Result, err error) {
	if span == nil {
		return
	}
	reason := res.StopReason
	if err != nil {
		reason = subagent.Error
	}
	if span.IsRecording() {
		// One SetAttributes: each call grows the span's attributes.
		var buf [10]attribute.KeyValue
		attrs := append(e.attrs(buf[:0]), SubStopReason.String(string(reason)))
		if u := res.Usage; u != nil {
			attrs = append(attrs, InputTokens.Int(u.InputTokens), OutputTokens.Int(u.OutputTokens))
		}
		if reason != subagent.Completed {
			attrs = append(attrs, ErrorType.String(string(reason)))
			span.SetStatus(codes.Error, cut(detail(res, err)))
		}
		span.SetAttributes(attrs...)
		span.AddEvent(EventEnd)
	}
	span.End()
}

// EndFailed ends a run span whose start failed.
func EndFailed(span trace.Span, e Ended, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		var buf [6]attribute.KeyValue
		span.SetAttributes(append(e.attrs(buf[:0]), ErrorType.String(errorType(err)))...)
		span.SetStatus(codes.Error, cut(err.Error()))
	}
	span.End()
}

// Chat is a model call in progress: its span (nil when tracing is off)
// and what its metrics and its span's end need.
type Chat struct {
	span         trace.Span
	begun        time.Time
	provider     string
	model        string
	conversation string
}

// StartChat starts the span chat {model} of a model call of the agent
// whose session is conversation, when tracing is on, and times it for the
// metrics when they are on. Call it only when Active.
func StartChat(ctx context.Context, provider, model, conversation string) (context.Context, Chat) {
	c := Chat{provider: provider, model: model, conversation: conversation}
	if Metering() {
		c.begun = time.Now()
	}
	if !On() {
		return ctx, c
	}
	k := kindOf(OpChat, model, provider)
	ctx, c.span = tracer().Start(ctx, k.name, k.opts[client]...)
	return ctx, c
}

// End ends the model call with its usage, or its error.
func (c Chat) End(ctx context.Context, usage subagent.Usage, stop subagent.StopReason, err error) {
	if !c.begun.IsZero() {
		recordChat(ctx, c, usage, err)
	}
	if c.span == nil {
		return
	}
	if c.span.IsRecording() {
		// One SetAttributes: each call grows the span's attributes.
		var buf [5]attribute.KeyValue
		attrs := append(buf[:0], ConversationID.String(c.conversation))
		if err != nil {
			attrs = append(attrs, ErrorType.String(errorType(err)))
			c.span.SetStatus(codes.Error, cut(err.Error()))
		} else {
			attrs = append(attrs, InputTokens.Int(usage.InputTokens), OutputTokens.Int(usage.OutputTokens))
			if c.model != "" {
				attrs = append(attrs, ResponseModel.String(c.model))
			}
			if stop != "" && stop != subagent.Completed {
				attrs = append(attrs, SubStopReason.String(string(stop)))
			}
		}
		c.span.SetAttributes(attrs...)
	}
	c.span.End()
}

// StartTool starts the span execute_tool {tool} of a tool call; the
// name and id are the model's, cut at nameLimit bytes (K3). Call it only
// when On.
func StartTool(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	// Its attributes all at its start: the call id would cost as much at
	// its end as it does here. They and the options share an allocation
	// (passed one by one, each is its own).
	k := kindOf(OpExecuteTool, name, "")
	s := &toolStart{attrs: [...]attribute.KeyValue{
		OperationName.String(OpExecuteTool),
		ToolName.String(limit(name)),
		ToolCallID.String(limit(callID)),
	}}
	s.opts = [...]trace.SpanStartOption{spanKinds[internal], trace.WithAttributes(s.attrs[:]...)}
	return tracer().Start(ctx, k.name, s.opts[:]...)
}

// toolStart is what StartTool passes to the tracer.
type toolStart struct {
	attrs [3]attribute.KeyValue
	opts  [2]trace.SpanStartOption
}

// EndTool ends a tool call's span; a call that failed gets error.type
// tool_error (its text is the model's to read, not the trace's).
func EndTool(span trace.Span, isError bool) {
	if span == nil {
		return
	}
	if isError && span.IsRecording() {
		span.SetAttributes(ErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "the tool call failed")
	}
	span.End()
}

// errorType is error.type for err: a context's end by name, else the
// Go type's name (the convention's fallback for errors without a code).
func errorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER"
}

func detail(res subagent.Result, err error) string {
	if err != nil {
		return err.Error()
	}
	if res.Detail != "" {
		return res.Detail
	}
	return "stopped: " + string(res.StopReason)
}

// statusLimit caps a status description: a detail may quote a model's
// output at length, and a span is no place for it.
const statusLimit = 256

func cut(s string) string {
	if len(s) <= statusLimit {
		return s
	}
	return s[:statusLimit] + "… (" + strconv.Itoa(len(s)-statusLimit) + " more bytes)"
}
