package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Run appends prompt as a user turn and loops model calls and tool calls
// until the model answers, ctx ends, or something fails. An empty prompt
// continues the session as it is (a resumed child picking up where it
// stopped). A history that ends in tool calls without results (the process
// died while they ran) gets error results saying they were interrupted,
// so the model never sees a call without a result and may retry it. Failures settle as a
// stop reason with a Detail; Run never returns an error value. steer may be
// nil. A panic in the Model is not recovered: the caller above the loop (the
// run actor) owns that failure, while a panicking Tool becomes an error
// result.
func (a *Agent) Run(ctx context.Context, prompt []subagent.ContentBlock, steer SteerSource) subagent.Result {
	if !a.running.CompareAndSwap(false, true) {
		return subagent.Stopped(subagent.Error, "agent: Run is already in progress")
	}
	defer a.running.Store(false)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.mu.Lock()
	if a.life.Err() != nil {
		a.mu.Unlock()
		return aborted(a.life)
	}
	usage := &subagent.Usage{}
	a.cancelRun, a.usage = cancel, usage
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.cancelRun, a.usage = nil, nil
		a.mu.Unlock()
	}()
	// Children this loop starts through the Service are cancelled with
	// ctx when the agent closes: no second binding is needed.
	ctx = subagent.WithinLifetime(ctx, a)
	res, recorded := a.run(ctx, prompt, steer)
	if res.Usage == nil {
		res.Usage = a.usageSoFar()
	}
	if !recorded {
		a.recordStop(ctx, res)
	}
	return res
}

// usageSoFar copies the usage of the Run in progress.
func (a *Agent) usageSoFar() *subagent.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := *a.usage
	return &u
}

// KindStop marks the log-only record an activation ends with: how it
// stopped, so that a session can be listed with its state without
// replaying it (see Stop).
const KindStop = "agent/stop"

// Stop is the data of a KindStop record.
type Stop struct {
	StopReason subagent.StopReason `json:"stopReason"`
	Detail     string              `json:"detail,omitempty"`
	Usage      *subagent.Usage     `json:"usage,omitempty"`
}

// stopRecord is the KindStop record of res.
func stopRecord(res subagent.Result) persistence.Record {
	data, _ := json.Marshal(Stop{StopReason: res.StopReason, Detail: res.Detail, Usage: res.Usage}) // plain fields always marshal
	return persistence.Record{Kind: KindStop, Data: data}
}

// recordStop appends how an activation that ended without a final turn
// stopped, also after a cancel (a final turn carries it in its own
// append). It is informational: a failure is the store's to report on the
// next append, and the result already says how the run ended.
func (a *Agent) recordStop(ctx context.Context, res subagent.Result) {
	_ = a.store.Append(context.WithoutCancel(ctx), a.header.SessionID, stopRecord(res))
}

// run is Run's loop; recorded says whether the result's KindStop record
// went out with the final turn.
func (a *Agent) run(ctx context.Context, prompt []subagent.ContentBlock, steer SteerSource) (res subagent.Result, recorded bool) {
	first := a.interrupted()
	if len(prompt) > 0 {
		first = append(first, Message{Role: User, Content: prompt})
	} else if a.empty() {
		return subagent.Stopped(subagent.Error, "agent: nothing to continue: the session has no turns and the prompt is empty"), false
	}
	if err := a.commit(ctx, nil, first...); err != nil {
		return a.storeFailed(ctx, err), false
	}
	corrected := false // an answer that missed the output schema was sent back once
	step := 0
	var onText func(string) // one per Run: the model calls it on this goroutine, during step
	if a.onStep != nil {
		onText = func(delta string) { a.notify(step, subagent.TextDelta, delta, false, nil) }
	}
	for step = 1; ; step++ {
		if ctx.Err() != nil {
			return aborted(ctx), false
		}
		// Check the budget before Take so that no steer message is taken
		// that no request will carry.
		if step > a.maxSteps {
			return subagent.Stopped(subagent.Error, fmt.Sprintf("agent: step limit of %d model calls reached", a.maxSteps)), false
		}
		if steer != nil {
			if res, ok := a.admit(ctx, step, steer); !ok {
				return res, false
			}
		}
		req, offered := a.request()
		req.OnText = onText
		a.notify(step, subagent.ModelCallStarted, "", false, nil)
		resp, err := a.model.Generate(ctx, req)
		if err != nil {
			a.notify(step, subagent.ModelCallFinished, err.Error(), true, nil)
			if ctx.Err() != nil {
				return aborted(ctx), false
			}
			return subagent.Stopped(subagent.Error, "agent: model: "+err.Error()), false
		}
		callUsage := resp.Usage
		a.notify(step, subagent.ModelCallFinished, "", false, &callUsage)
		a.AddUsage(resp.Usage)

		msg := resp.Message
		msg.Role = Assistant
		malformed := sanitizeArgs(&msg)
		var end *subagent.Result // set when this turn ends the run
		switch {
		case resp.StopReason != "" && resp.StopReason != subagent.Completed:
			// Max-tokens, refusal or a reason a model adds: the turn is over.
			end = &subagent.Result{Output: slices.Clone(msg.Content), StopReason: resp.StopReason}
		case len(msg.ToolCalls) == 0:
			final, invalid := a.final(step, msg)
			if invalid != nil && !corrected {
				// One corrective turn: the model sees why its answer
				// missed the schema and answers again.
				corrected = true
				fix := Message{Role: User, Content: []subagent.ContentBlock{subagent.Text(
					"Your final answer does not match the required JSON schema: " + invalid.Error() +
						". Answer again with only a JSON value that matches it.")}}
				if err := a.commit(ctx, nil, msg, fix); err != nil {
					return a.storeFailed(ctx, err), false
				}
				continue
			}
			end = &final
		}
		if end != nil {
			// The final turn and how the run stopped share one append.
			end.Usage = a.usageSoFar()
			if err := a.commit(ctx, []persistence.Record{stopRecord(*end)}, msg); err != nil {
				return a.storeFailed(ctx, err), false
			}
			return *end, true
		}
		if err := a.commit(ctx, nil, msg); err != nil {
			return a.storeFailed(ctx, err), false
		}
		results := a.callTools(ctx, step, msg.ToolCalls, offered, malformed)
		if err := a.commit(ctx, nil, results...); err != nil {
			return a.storeFailed(ctx, err), false
		}
	}
}

// admit takes the pending steer messages and appends them as user turns,
// so that the next request carries them. ok is false when the run must end
// with res.
func (a *Agent) admit(ctx context.Context, step int, steer SteerSource) (res subagent.Result, ok bool) {
	taken, err := steer.Take(ctx)
	if err != nil {
		return subagent.Stopped(subagent.Aborted, "agent: steer: "+err.Error()), false
	}
	if len(taken) == 0 {
		return subagent.Result{}, true
	}
	msgs := make([]Message, len(taken))
	for i, m := range taken {
		msgs[i] = Message{Role: User, Content: m}
	}
	if err := a.commit(ctx, nil, msgs...); err != nil {
		return a.storeFailed(ctx, err), false
	}
	for _, m := range taken {
		a.notify(step, subagent.SteerAdmitted, firstLine(subagent.TextOf(m)), false, nil)
	}
	return subagent.Result{}, true
}

// aborted settles a run whose context ended, keeping why (a deadline, a
// cancel) as the Cause.
func aborted(ctx context.Context) subagent.Result {
	cause := context.Cause(ctx)
	res := subagent.Stopped(subagent.Aborted, cause.Error())
	res.Cause = cause
	return res
}

// storeFailed settles a failed append. An append that failed because ctx
// ended is a cancellation, not a storage fault.
func (a *Agent) storeFailed(ctx context.Context, err error) subagent.Result {
	if ctx.Err() != nil {
		return aborted(ctx)
	}
	res := subagent.Stopped(subagent.Error, "agent: persist turn: "+err.Error())
	res.Cause = &CheckpointError{Err: err}
	return res
}

// ErrCheckpoint is matched by every CheckpointError.
var ErrCheckpoint = errors.New("agent: a turn could not be made durable")

// CheckpointError is the Cause of a run that stopped because the log
// refused a turn: nothing after the last acknowledged turn is durable, so
// a run's owner must not publish output from it (R5).
type CheckpointError struct{ Err error }

func (e *CheckpointError) Error() string   { return ErrCheckpoint.Error() + ": " + e.Err.Error() }
func (e *CheckpointError) Unwrap() []error { return []error{ErrCheckpoint, e.Err} }

// interrupted answers the tool calls of a history that ends in an assistant
// turn without tool results (a run stopped while its tools ran), so that the
// model never sees a call without a result.
func (a *Agent) interrupted() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.msgs) == 0 {
		return nil
	}
	last := a.msgs[len(a.msgs)-1]
	if last.Role != Assistant {
		return nil
	}
	var out []Message
	for _, c := range last.ToolCalls {
		out = append(out, errorResult(c.ID, "tool call "+c.Name+" was interrupted before it finished"))
	}
	return out
}

// empty reports whether the history has no turn.
func (a *Agent) empty() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.msgs) == 0
}

// commit persists msgs, followed by log-only records (how the run
// stopped), in one append, then makes msgs part of the history. The
// history holds what the store decodes, never the caller's memory, so a
// resumed session sees exactly the turns a live one did.
func (a *Agent) commit(ctx context.Context, logOnly []persistence.Record, msgs ...Message) error {
	if len(msgs) == 0 && len(logOnly) == 0 {
		return nil
	}
	recs := make([]persistence.Record, len(msgs), len(msgs)+len(logOnly))
	stored := make([]Message, len(msgs))
	for i, m := range msgs {
		var err error
		if recs[i], stored[i], err = encode(m); err != nil {
			return err
		}
	}
	recs = append(recs, logOnly...)
	if err := a.store.Append(ctx, a.header.SessionID, recs...); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range stored {
		a.msgs = append(a.msgs, m)
		a.settle()
	}
	return nil
}

// encode returns m's log record and m as the history keeps it: as decoding
// the record yields it.
func encode(m Message) (persistence.Record, Message, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return persistence.Record{}, Message{}, err
	}
	stored, err := decoded(m, data)
	return persistence.Record{Kind: persistence.KindMessage, Data: data}, stored, err
}

// decoded returns m as decoding data, its JSON, yields it. When every string
// of m is valid UTF-8 that is a deep copy with empty slices as nil, made
// without paying for a decode; otherwise JSON replaced the invalid bytes and
// only decoding tells how.
func decoded(m Message, data []byte) (Message, error) {
	valid := utf8.ValidString(string(m.Role)) && utf8.ValidString(m.ToolCallID)
	for _, c := range m.Content {
		valid = valid && utf8.ValidString(c.Type) && utf8.ValidString(c.Text)
	}
	for _, c := range m.ToolCalls {
		valid = valid && utf8.ValidString(c.ID) && utf8.ValidString(c.Name)
	}
	if !valid {
		var out Message
		err := json.Unmarshal(data, &out)
		return out, err
	}
	m.Content = slices.Clone(m.Content)
	if len(m.Content) == 0 {
		m.Content = nil
	}
	if len(m.ToolCalls) == 0 {
		m.ToolCalls = nil
	} else {
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range m.ToolCalls {
			m.ToolCalls[i].Args = bytes.Clone(m.ToolCalls[i].Args)
		}
	}
	return m, nil
}

// sanitizeArgs makes the arguments of every tool call of msg compact JSON
// and reports the calls whose arguments were not JSON. Arguments are model
// output, hostile input (K3): empty ones become {}, malformed ones are kept
// as a JSON string so the model still sees what it sent, and those calls
// never reach a tool.
func sanitizeArgs(msg *Message) map[int]bool {
	msg.ToolCalls = slices.Clone(msg.ToolCalls)
	malformed := make(map[int]bool)
	for i, c := range msg.ToolCalls {
		var buf bytes.Buffer
		switch {
		case len(bytes.TrimSpace(c.Args)) == 0:
			msg.ToolCalls[i].Args = json.RawMessage(`{}`)
		case json.Compact(&buf, c.Args) != nil:
			quoted, _ := json.Marshal(string(c.Args)) // a string always marshals
			msg.ToolCalls[i].Args = quoted
			malformed[i] = true
		default:
			msg.ToolCalls[i].Args = buf.Bytes()
		}
	}
	return malformed
}

// request snapshots the next model request and the tools it offers.
func (a *Agent) request() (Request, map[string]Tool) {
	req := Request{
		System:       a.system,
		MaxTokens:    a.opts.MaxTokens,
		OutputSchema: a.outputSchema,
	}
	offered := make(map[string]Tool)
	for _, t := range a.tools {
		if c, ok := t.(Conditional); ok && !c.Available(a) {
			continue
		}
		spec := t.Spec()
		req.Tools = append(req.Tools, spec)
		offered[spec.Name] = t
	}
	a.mu.Lock()
	// Turns are never modified once appended, so the model shares the
	// history instead of a copy per step (a step's cost must not grow with
	// the history); capping the capacity keeps a model's append from
	// writing into the loop's next turn.
	req.Messages = a.msgs[:len(a.msgs):len(a.msgs)]
	a.mu.Unlock()
	return req, offered
}

// final settles a model answer without tool calls; invalid says why it
// misses the output schema, if it does.
func (a *Agent) final(step int, msg Message) (res subagent.Result, invalid error) {
	text := subagent.TextOf(msg.Content)
	a.notify(step, subagent.MessageText, text, false, nil)
	res = subagent.Result{Output: slices.Clone(msg.Content), StopReason: subagent.Completed}
	if a.schema == nil {
		return res, nil
	}
	structured, err := schema.Validate(a.schema, text)
	if err != nil {
		res.StopReason, res.Detail = subagent.Error, "agent: "+err.Error()
		return res, err
	}
	res.Structured = structured
	return res, nil
}

// callTools runs calls concurrently, at most the agent's parallel cap at
// once, and returns their results in call order. The calls share ctx, so
// cancelling the parent cancels them all (F1).
func (a *Agent) callTools(ctx context.Context, step int, calls []ToolCall, offered map[string]Tool, malformed map[int]bool) []Message {
	results := make([]Message, len(calls))
	var wg sync.WaitGroup
	slots := make(chan struct{}, a.parallel)
	for i, c := range calls {
		if malformed[i] {
			a.notify(step, subagent.ToolCallStarted, c.Name+" "+string(c.Args), false, nil)
			results[i] = errorResult(c.ID, "tool "+c.Name+": arguments are not valid JSON")
			a.notify(step, subagent.ToolCallFinished, c.Name, true, nil)
			continue
		}
		call := func() {
			a.notify(step, subagent.ToolCallStarted, c.Name+" "+string(c.Args), false, nil)
			results[i] = a.callTool(ctx, c, offered[c.Name])
			a.notify(step, subagent.ToolCallFinished, c.Name, results[i].IsError, nil)
		}
		if len(calls) == 1 {
			// A lone call runs on the loop's goroutine: no goroutine to
			// start, no fresh stack to grow.
			call()
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			call()
		})
	}
	wg.Wait()
	return results
}

// callTool runs one call. Tools are user code: a panic becomes an error
// result instead of taking the process down.
func (a *Agent) callTool(ctx context.Context, c ToolCall, t Tool) (res Message) {
	if t == nil {
		return errorResult(c.ID, "unknown tool "+c.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			res = errorResult(c.ID, fmt.Sprintf("tool %s panicked: %v", c.Name, r))
		}
	}()
	if err := a.checkArgs(t.Spec(), c.Args); err != nil {
		return errorResult(c.ID, fmt.Sprintf("tool %s: %v", c.Name, err))
	}
	out, err := t.Call(ctx, a, c.Args)
	if err != nil {
		return errorResult(c.ID, err.Error())
	}
	return Message{Role: ToolRole, ToolCallID: c.ID, Content: []subagent.ContentBlock{subagent.Text(out)}}
}

// checkArgs validates a call's arguments against the tool's parameter
// schema before the tool runs (K3): the model gets an error result it can
// correct, and no tool runs half on bad input.
func (a *Agent) checkArgs(spec ToolSpec, args json.RawMessage) error {
	if len(spec.Parameters) == 0 {
		return nil
	}
	s, err := schema.Compile(spec.Parameters)
	if err != nil {
		return fmt.Errorf("its parameter schema does not compile: %w", err)
	}
	_, err = schema.Validate(s, string(args))
	return err
}

func errorResult(id, text string) Message {
	return Message{Role: ToolRole, ToolCallID: id, IsError: true, Content: []subagent.ContentBlock{subagent.Text(text)}}
}

// notify tells OnStep of progress. It takes the step's fields rather than
// a Step so that its many call sites in the loop pass them in registers
// instead of each keeping a Step on the stack: a parked child's stack is
// most of what it costs (issue 11's child-memory goal).
func (a *Agent) notify(n int, kind subagent.ProgressKind, text string, isError bool, usage *subagent.Usage) {
	if a.onStep != nil {
		a.onStep(Step{Agent: a.ID(), N: n, Kind: kind, Text: text, IsError: isError, Usage: usage})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
