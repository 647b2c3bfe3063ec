package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Defaults of Config's limits.
const (
	defaultMaxSteps         = 64
	defaultMaxParallelTools = 8
)

// Config configures an Agent.
type Config struct {
	// Store keeps the session log; required.
	Store persistence.Store
	// Header heads the session; SessionID is required (the caller mints
	// it). New creates the session in Store unless Resume is set.
	Header subagent.SessionHeader
	// Resume loads the header and history of an existing session instead of
	// creating one; the stored header replaces Header.
	Resume bool
	// Prompt, with Resume, is the new activation's prompt: it is logged
	// with the activation's take of the log (after results for the tool
	// calls an earlier activation left unanswered), so that it is durable
	// once New returns. Run then continues from it with no prompt of its
	// own. Those unanswered calls are answered as interrupted, a
	// Recoverer's too: recovering them takes a Run, and the prompt cannot
	// wait for it. Without Prompt, Run recovers them (see Recoverer).
	Prompt []subagent.ContentBlock
	// Seed are model-visible turns a new session starts with (a fork's
	// copy of its parent's completed turns), and LogOnly log-only records
	// it starts with (the subagent descriptor): both are created with the
	// session, all or nothing.
	Seed    []Message
	LogOnly []persistence.Record
	// Deferred, for a new session in a store that can defer a create
	// (one with CreateDeferred, as the bbolt store has), creates it there without a write of
	// its own: the session's first turn stores it, with the records it
	// was created with, in one write. For a session whose creation can be
	// derived again after a crash (a delegated child's, S9).
	Deferred bool
	// Model writes the assistant turns; required.
	Model Model
	// Tools the model may call; names must be distinct.
	Tools []Tool
	// System is the system prompt (the persona).
	System  string
	Options subagent.AgentOptions
	// OutputSchema, when set, is a JSON Schema the final answer's text must
	// satisfy as JSON.
	OutputSchema json.RawMessage
	// ToolFilter removes tools by name.
	ToolFilter *subagent.ToolFilter
	// MaxSteps caps model calls per Run; 64 when 0.
	MaxSteps int
	// MaxParallelTools caps how many of one model turn's tool calls run at
	// once (delegations among them, F1); 8 when 0.
	MaxParallelTools int
	// OnStep, when set, is told about progress. It is called synchronously
	// from the loop (from several goroutines while tool calls run
	// concurrently) and must not block.
	OnStep func(Step)
}

// ErrConfig is matched by every error of a Config New rejects; the error
// names the field and why.
var ErrConfig = errors.New("agent: invalid config")

// configError names the Config field New rejected.
type configError struct {
	Field  string
	Reason string
}

func (e *configError) Error() string { return "agent: invalid config " + e.Field + ": " + e.Reason }
func (e *configError) Unwrap() error { return ErrConfig }

// Agent is one session's agent loop.
type Agent struct {
	store    persistence.Store
	header   subagent.SessionHeader
	model    Model
	tools    []Tool // after the tool filter, in Config order
	opts     subagent.AgentOptions
	shape    *shape // nil without Config.System and Config.OutputSchema
	maxSteps int32  // at most math.MaxInt32 model calls, beyond any run's reach
	parallel int32
	onStep   func(Step)

	running atomic.Bool
	// closed is set when the agent is closed: its loop stops, and the seam
	// refuses to start (or keep) its children.
	closed atomic.Bool
	// parent is what only an agent that delegates needs (its Lifetime),
	// made on first use: most agents are
	// children that never delegate, and a parked child's memory is what
	// issue 11 counts.
	parent atomic.Pointer[parentSide]
	// cancelRun cancels the Run in progress (nil when none), and runUsage
	// sums its model calls and what its tools report (children's usage);
	// both under mu, as are parent's onClose.
	cancelRun context.CancelCauseFunc
	runUsage  subagent.Usage

	// The loop's own, used only by the goroutine of the Run in progress:
	// onText and onRetry are the Request.OnText and OnRetry of every
	// step, telling OnStep of step textStep; offerSpecs and offers are what the last request offered
	// (see request).
	onText     func(string)
	onRetry    func(int, error, time.Duration)
	offerSpecs []ToolSpec
	offers     []offer
	textStep   int32 // a step number, within maxSteps

	// settled is how many leading msgs are completed turns: it stops short
	// of an assistant message whose tool calls have no results yet. Both
	// under mu. (A history of math.MaxInt32 turns would not fit in memory.)
	settled int32
	mu      sync.Mutex
	msgs    []Message

	// seq is where this activation last saw its log end: every append is
	// conditioned on it (Store.AppendAt), so an activation that lost the
	// log to a newer one cannot write to it (S8's one writer). Under
	// appendMu, which also orders the appends themselves.
	appendMu sync.Mutex
	seq      uint64
	// callsAt is the log record of the history's last turn of tool calls
	// (see CallRef); the loop's own.
	callsAt uint64
}

// shape is what every request of an agent carries besides the history and
// the tools, when it carries anything: Config.System, and
// Config.OutputSchema as given and compiled. Children are mostly without
// either, and a parked child's memory is what issue 11 counts.
type shape struct {
	system   string
	schema   json.RawMessage
	compiled *jsonschema.Schema // nil when schema is empty
}

// parentSide is the part of an Agent only a delegating agent uses.
type parentSide struct {
	// life is made on first use (Lifetime) and ends, with cause
	// ErrClosed, when the agent is closed; under lifeMu.
	lifeMu sync.Mutex
	life   context.Context
	close  context.CancelCauseFunc
}

// resumedRoots holds, for a traced top-level agent resumed from its log
// whose first run has not started, the traceparent of the last run span
// the log records (agentlog.Activation): that run's span links to it
// (O3), once (a run links to the run before it in an earlier process,
// not to every run before it in this one). Apart from the Agent, which
// has no room left (TestAgentSize), and from parentSide, which every
// delegating agent has: nothing is kept while tracing is off. Close
// removes what a run did not take.
var resumedRoots sync.Map // *Agent → string

// earlierRun takes the traceparent the next run span of the agent links
// to: "" when none.
func (a *Agent) earlierRun() string {
	tp, _ := resumedRoots.LoadAndDelete(a)
	s, _ := tp.(string)
	return s
}

// child reports whether the agent is a delegated child: its activation
// runs in the run span of the Service that started it, which the context
// of New carries; a top-level agent's run span is its Run's.
func (a *Agent) child() bool { return a.header.ParentSessionID != "" }

// side returns the agent's parentSide, made on first use.
func (a *Agent) side() *parentSide {
	if p := a.parent.Load(); p != nil {
		return p
	}
	a.parent.CompareAndSwap(nil, new(parentSide))
	return a.parent.Load()
}

var (
	_ subagent.Agent    = (*Agent)(nil)
	_ subagent.Closable = (*Agent)(nil)
)

// ErrClosed is the cause of everything an agent's Close ends. For the
// agent's children it is their parent closing: it matches
// subagent.ErrParentClosed.
var ErrClosed = fmt.Errorf("agent: closed: %w", subagent.ErrParentClosed)

// New checks cfg and creates (or, with Resume, loads) the session.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	switch {
	case cfg.Store == nil:
		return nil, &configError{Field: "Store", Reason: "required"}
	case cfg.Model == nil:
		return nil, &configError{Field: "Model", Reason: "required"}
	case cfg.Header.SessionID == "":
		return nil, &configError{Field: "Header.SessionID", Reason: "required"}
	case cfg.MaxSteps < 0:
		return nil, &configError{Field: "MaxSteps", Reason: "must not be negative"}
	case cfg.MaxParallelTools < 0:
		return nil, &configError{Field: "MaxParallelTools", Reason: "must not be negative"}
	}
	a := &Agent{
		store:    cfg.Store,
		header:   cfg.Header,
		model:    cfg.Model,
		opts:     cloneOptions(cfg.Options),
		maxSteps: int32(min(cmp.Or(cfg.MaxSteps, defaultMaxSteps), math.MaxInt32)),
		parallel: int32(min(cmp.Or(cfg.MaxParallelTools, defaultMaxParallelTools), math.MaxInt32)),
		onStep:   cfg.OnStep,
	}
	seen := make(map[string]bool)
	for i, t := range cfg.Tools {
		if t == nil {
			return nil, &configError{Field: fmt.Sprintf("Tools[%d]", i), Reason: "nil tool"}
		}
		name := t.Spec().Name
		if seen[name] {
			return nil, &configError{Field: "Tools", Reason: fmt.Sprintf("duplicate tool name %q", name)}
		}
		seen[name] = true
		if cfg.ToolFilter.Apply(name) {
			if a.tools == nil {
				a.tools = make([]Tool, 0, len(cfg.Tools)-i)
			}
			a.tools = append(a.tools, t)
		}
	}
	if cfg.System != "" || cfg.OutputSchema != nil {
		// An empty schema is none, but the request carries it as given.
		a.shape = &shape{system: cfg.System, schema: bytes.Clone(cfg.OutputSchema)}
	}
	if len(cfg.OutputSchema) > 0 {
		s, err := schema.Compile(cfg.OutputSchema)
		if err != nil {
			return nil, &configError{Field: "OutputSchema", Reason: err.Error()}
		}
		a.shape.compiled = s
	}
	var err error
	if cfg.Resume {
		err = a.load(ctx, cfg.Prompt)
	} else {
		err = a.create(ctx, cfg.LogOnly, cfg.Seed, cfg.Deferred)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// deferredCreator is a store that can create a session whose first write
// stores it (persistence's bbolt store).
type deferredCreator interface {
	CreateDeferred(ctx context.Context, h subagent.SessionHeader, recs ...persistence.Record) (uint64, error)
}

// ownStore is a store that copies the records the loop wrote itself
// without checking them again (persistence's memory store): their data
// is jsonv2.AppendMarshal's, valid by construction. CreateOwn checks the
// first checked records, which came from elsewhere (Config.LogOnly).
type ownStore interface {
	CreateOwn(_ jsonv2.Own, ctx context.Context, h subagent.SessionHeader, checked int, recs ...persistence.Record) (uint64, error)
	AppendOwnAt(_ jsonv2.Own, ctx context.Context, sessionID string, expect uint64, recs ...persistence.Record) (uint64, error)
}

// create creates the session with the log-only records and the seed,
// deferred when asked and the store can.
func (a *Agent) create(ctx context.Context, logOnly []persistence.Record, seed []Message, deferred bool) error {
	// A traced child's first activation: its run span, for the link of
	// the next one (O3), in the creation's own append.
	var act persistence.Record
	traced := false
	if otelx.On() && a.child() {
		act, traced = agentlog.Traced(ctx)
	}
	// The store copies what it is given (persistence.Store): without a
	// seed, logOnly goes to it as it is.
	recs := logOnly
	if traced && len(seed) == 0 {
		recs = append(logOnly[:len(logOnly):len(logOnly)], act)
	}
	var b *batch
	if len(seed) > 0 {
		b = getBatch()
		defer b.release()
		for _, r := range logOnly {
			b.addRecord(r)
		}
		if traced {
			b.addRecord(act)
		}
		for i := range seed {
			if err := b.add(&seed[i], ownNothing); err != nil {
				return &configError{Field: fmt.Sprintf("Seed[%d]", i), Reason: err.Error()}
			}
		}
		recs = b.records()
	}
	var seq uint64
	var err error
	if d, ok := a.store.(deferredCreator); ok && deferred {
		seq, err = d.CreateDeferred(ctx, a.header, recs...)
	} else if o, ok := a.store.(ownStore); ok {
		seq, err = o.CreateOwn(jsonv2.Own{}, ctx, a.header, len(logOnly), recs...)
	} else {
		seq, err = a.store.CreateWith(ctx, a.header, recs...)
	}
	if err != nil {
		return fmt.Errorf("agent: create session: %w", err)
	}
	a.seq = seq
	if b != nil {
		// The seed and room for the answer to it, in one allocation (a
		// parked child keeps the spare room: 80 B of issue 11's child-memory).
		a.msgs = make([]Message, 0, len(b.stored)+1)
		for _, m := range b.stored {
			a.msgs = append(a.msgs, m)
			a.settle()
		}
	}
	return nil
}

func cloneOptions(o subagent.AgentOptions) subagent.AgentOptions {
	if o.MaxDepth != nil {
		m := *o.MaxDepth
		o.MaxDepth = &m
	}
	return o
}

// load restores the header and the model-visible turns of the session,
// then takes the log (agentlog.KindActivation) and logs prompt, if any, in the same
// append. Other record kinds are log-only and skipped.
func (a *Agent) load(ctx context.Context, prompt []subagent.ContentBlock) error {
	h, entries, err := a.store.LoadFrom(ctx, a.header.SessionID, 0)
	if err != nil {
		return fmt.Errorf("agent: load session: %w", err)
	}
	a.header = h
	for i, r := range entries {
		a.seq = r.Seq
		if r.Kind != persistence.KindMessage {
			continue
		}
		var m Message
		if err := json.Unmarshal(r.Data, &m); err != nil {
			return fmt.Errorf("agent: load session %q: record %d: %w", h.SessionID, i, err)
		}
		if m.Role != User && m.Role != Assistant && m.Role != ToolRole {
			return fmt.Errorf("agent: load session %q: record %d: unknown role %q", h.SessionID, i, m.Role)
		}
		if m.Role == Assistant && len(m.ToolCalls) > 0 {
			a.callsAt = r.Seq
		}
		a.msgs = append(a.msgs, m)
		a.settle()
	}
	orderResults(a.msgs)
	var msgs []Message
	if len(prompt) > 0 {
		msgs = append(a.interrupted(), Message{Role: User, Content: prompt})
	}
	act := agentlog.Untraced()
	if otelx.On() {
		switch earlier := agentlog.LastTrace(entries); {
		case a.child():
			// ctx carries this activation's run span: linked to the
			// earlier one's, and recorded for the next one's link (O3).
			otelx.LinkEarlier(ctx, earlier)
			act, _ = agentlog.Traced(ctx)
		case earlier != "":
			resumedRoots.Store(a, earlier)
		}
	}
	if err := a.commitAfter(ctx, nil, ownNothing, act, msgs...); err != nil {
		return fmt.Errorf("agent: take session %q: %w", h.SessionID, err)
	}
	a.orderLastResults()
	return nil
}

// Close ends the agent: a Run in progress stops (aborted, cause
// ErrClosed), later Runs stop at once, and the Service starts no child for
// it and cancels the children it has. Idempotent; the session stays.
func (a *Agent) Close() {
	a.closed.Store(true)
	resumedRoots.Delete(a)
	if p := a.parent.Load(); p != nil {
		p.lifeMu.Lock()
		if p.close != nil {
			p.close(ErrClosed)
		}
		p.lifeMu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelRun != nil {
		a.cancelRun(ErrClosed)
	}
}

// AddUsage adds u to the usage of the Run in progress: the delegate tool
// rolls its children's usage up into the parent this way (U1). Outside a
// Run it does nothing.
func (a *Agent) AddUsage(u subagent.Usage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelRun != nil {
		a.runUsage.Add(u)
	}
}

// Lifetime implements subagent.Closable: it ends when the agent closes.
func (a *Agent) Lifetime() context.Context {
	p := a.side()
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.life == nil {
		// Made on first use: most agents (children) are never asked.
		p.life, p.close = context.WithCancelCause(context.Background())
		if a.closed.Load() {
			p.close(ErrClosed)
		}
	}
	return p.life
}

// ID is the session id.
func (a *Agent) ID() string { return a.header.SessionID }

// SessionID is the session id.
func (a *Agent) SessionID() string { return a.header.SessionID }

// Header is the session header.
func (a *Agent) Header() subagent.SessionHeader { return a.header }

// Options are the agent options.
func (a *Agent) Options() subagent.AgentOptions { return cloneOptions(a.opts) }

// Turns returns a copy of the completed turns: the history up to its last
// final answer, never the turn in flight (the prompt being answered, its
// tool calls and their results).
func (a *Agent) Turns() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Message, a.settled)
	for i, m := range a.msgs[:a.settled] {
		out[i] = cloneMessage(m)
	}
	return out
}

// settle advances settled past the last message when it is a final
// answer (an assistant turn without tool calls), which completes a turn:
// what follows it (a prompt, tool calls and their results, steers) is the
// turn in flight (P2). Callers hold mu (or own a not yet shared Agent).
func (a *Agent) settle() {
	if last := &a.msgs[len(a.msgs)-1]; last.Role == Assistant && len(last.ToolCalls) == 0 {
		a.settled = int32(len(a.msgs))
	}
}

func cloneMessage(m Message) Message {
	m.Content = slices.Clone(m.Content)
	m.ToolCalls = slices.Clone(m.ToolCalls)
	for i := range m.ToolCalls {
		m.ToolCalls[i].Args = bytes.Clone(m.ToolCalls[i].Args)
	}
	return m
}
