package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Run appends prompt as a user turn and loops model calls and tool calls
// until the model answers, ctx ends, or something fails. An empty prompt
// continues the session as it is (a resumed child picking up where it
// stopped). A history that ends in tool calls without results (the process
// died while they ran) gets them first: a Recoverer's calls are recovered
// through their tool (S9), any other's are error results saying they were
// interrupted, so the model never sees a call without a result and may
// retry it. Failures settle as a
// stop reason with a Detail; Run never returns an error value. steer may be
// nil. A panic in the Model is not recovered: the caller above the loop (the
// run actor) owns that failure, while a panicking Tool becomes an error
// result.
//
// A steer source that owns ctx (a run actor's Gate: its Context method
// returns ctx and its Cancel method ctx's cancel) has the loop run under
// ctx as it is, and Close cancels ctx through that cancel; the owner
// cancels ctx once Run has returned. Any other ctx gets a cancellable
// context of Run's own for Close.
func (a *Agent) Run(ctx context.Context, prompt []subagent.ContentBlock, steer SteerSource) (res subagent.Result) {
	if o, ok := steer.(interface {
		Context() context.Context
		Cancel() context.CancelCauseFunc
	}); ok && o.Context() == ctx {
		if cancel := o.Cancel(); cancel != nil {
			a.runUnder(ctx, cancel, prompt, steer, &res)
			return res
		}
	}
	if otelx.On() {
		return a.runRoot(ctx, prompt, steer)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.runUnder(ctx, cancel, prompt, steer, &res)
	return res
}

// runRoot is Run for an agent its embedder runs itself (a top-level
// agent: a child runs under its run actor's Gate, in the Service's run
// span): a run span of its own, under whatever span ctx carries (an
// editor's, from ACP's _meta), heads its delegation tree (O1).
func (a *Agent) runRoot(ctx context.Context, prompt []subagent.ContentBlock, steer SteerSource) (res subagent.Result) {
	ctx, span := otelx.StartRoot(ctx, a.earlierRun())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.runUnder(ctx, cancel, prompt, steer, &res)
	otelx.EndRun(span, otelx.Ended{RunID: a.ID(), SessionID: a.header.SessionID, Depth: a.header.DelegationDepth}, res, nil)
	return res
}

// runUnder is Run under ctx as it is, without a context of its own:
// Close cancels ctx through cancel (with ErrClosed), which must be ctx's.
// The result is written to *res, not returned: a parked child's stack is
// most of what it costs (issue 11), and a result passed up by value takes
// room in every frame under the model call.
func (a *Agent) runUnder(ctx context.Context, cancel context.CancelCauseFunc, prompt []subagent.ContentBlock, steer SteerSource, res *subagent.Result) {
	if !a.running.CompareAndSwap(false, true) {
		*res = subagent.Result{StopReason: subagent.Error, Detail: "agent: Run is already in progress"}
		return
	}
	defer a.leave()
	if !a.enter(cancel) {
		*res = subagent.Result{StopReason: subagent.Aborted, Detail: ErrClosed.Error(), Cause: ErrClosed}
		return
	}
	l := loop{a: a, ctx: ctx}
	recorded := false
	if l.begin(prompt, res) {
		// The loop is here rather than in a function of its own: a frame
		// less under the model call (see loop).
		for l.step = 1; ; l.step++ {
			if l.ctx.Err() != nil {
				*res = aborted(l.ctx)
				break
			}
			// Check the budget before Take so that no steer message is
			// taken that no request will carry.
			if l.step > int(a.maxSteps) {
				*res = subagent.Result{StopReason: subagent.Error, Detail: fmt.Sprintf("agent: step limit of %d model calls reached", a.maxSteps)}
				break
			}
			if steer != nil && !l.admit(steer, res) {
				break
			}
			var done bool
			if done, recorded = l.generate(res); done {
				break
			}
		}
	}
	l.end(res, recorded)
}

// loop is what a step of runUnder's loop needs, in runUnder's frame: a
// parked child's stack is most of what it costs (issue 11), and Go halves
// a parked goroutine's stack only when it uses less than a quarter of it,
// so the frames under the model call hold little more than the call's own
// arguments and answer. recorded, where a step returns it, says whether
// the result's agentlog.KindStop record went out with the final turn.
type loop struct {
	a         *Agent
	ctx       context.Context
	tools     context.Context // see toolCtx
	step      int
	corrected bool // an answer that missed the output schema was sent back once
}

// toolCtx is the loop's context for its tools, marked as one that ends
// when the agent closes (rules.Within): children the tools
// start through the Service are cancelled with it when the agent closes,
// and need no second binding. It is made for the first tool call: a child
// parked on its first model call has no use for it, and a parked child's
// memory is what issue 11 counts.
func (l *loop) toolCtx() context.Context {
	if l.tools == nil {
		l.tools = rules.Within(l.ctx, l.a)
	}
	return l.tools
}

// enter marks the start of a Run under cancel; false when the agent is
// closed.
func (a *Agent) enter(cancel context.CancelCauseFunc) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return false
	}
	a.runUsage = subagent.Usage{}
	if cancel == nil {
		cancel = func(error) {} // a Run in progress has one (see AddUsage)
	}
	a.cancelRun = cancel
	return true
}

// leave marks the end of the Run that runUnder began.
func (a *Agent) leave() {
	a.mu.Lock()
	a.cancelRun = nil
	a.mu.Unlock()
	a.running.Store(false)
}

// end completes the result with the run's usage and, unless the final
// turn carried it, records how the run stopped.
func (l *loop) end(res *subagent.Result, recorded bool) {
	a, ctx := l.a, l.ctx
	if res.Usage == nil {
		res.Usage = a.usageSoFar()
	}
	if !recorded {
		a.recordStop(ctx, *res)
	}
}

// usageSoFar copies the usage of the Run in progress.
func (a *Agent) usageSoFar() *subagent.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.runUsage
	return &u
}

// recordStop appends how an activation that ended without a final turn
// stopped, also after a cancel (a final turn carries it in its own
// append). It is informational: a failure is the store's to report on the
// next append, and the result already says how the run ended.
func (a *Agent) recordStop(ctx context.Context, res subagent.Result) {
	_ = a.commit(context.WithoutCancel(ctx), &res, ownNothing)
}

// textSink is the Request.OnText of every step: the model calls it on the
// loop's goroutine, during the step, so one per agent does, reading the
// step from textStep. Nil without OnStep.
func (a *Agent) textSink() func(string) {
	if a.onStep == nil {
		return nil
	}
	if a.onText == nil {
		a.onText = func(delta string) { a.notify(int(a.textStep), subagent.TextDelta, delta, false, nil) }
	}
	return a.onText
}

// retrySink is the Request.OnRetry of every step, as textSink is its
// OnText: a retried model call is told as a ModelCallRetried step.
func (a *Agent) retrySink() func(int, error, time.Duration) {
	if a.onStep == nil {
		return nil
	}
	if a.onRetry == nil {
		a.onRetry = func(attempt int, err error, wait time.Duration) {
			text := fmt.Sprintf("attempt %d failed, retrying in %s: %s", attempt, wait.Round(time.Millisecond), firstLine(err.Error()))
			a.notify(int(a.textStep), subagent.ModelCallRetried, text, true, nil)
		}
	}
	return a.onRetry
}

// begin answers the calls an earlier run left without results (see
// recoverCalls) and appends prompt as a user turn; false when the run must
// end at once, with *res.
func (l *loop) begin(prompt []subagent.ContentBlock, res *subagent.Result) bool {
	a, ctx := l.a, l.ctx
	if calls := a.unanswered(); len(calls) > 0 {
		if err := a.recoverCalls(l.toolCtx(), calls); err != nil {
			*res = a.storeFailed(ctx, err)
			return false
		}
	}
	var rec persistence.Record
	if otelx.On() && !a.child() {
		rec = a.rootActivation(ctx)
	}
	var err error
	switch {
	case len(prompt) > 0:
		err = a.commitAfter(ctx, nil, ownNothing, rec, Message{Role: User, Content: prompt})
	case a.empty():
		*res = subagent.Result{StopReason: subagent.Error, Detail: "agent: nothing to continue: the session has no turns and the prompt is empty"}
		return false
	case rec.Kind != "":
		err = a.commitAfter(ctx, nil, ownNothing, rec)
	}
	if err != nil {
		*res = a.storeFailed(ctx, err)
		return false
	}
	return true
}

// rootActivation is the activation record of a traced top-level run,
// naming its run span (ctx's), which the first run of its session
// resumed later links to (O3); the zero record when the span does not
// record.
func (a *Agent) rootActivation(ctx context.Context) persistence.Record {
	if rec, ok := agentlog.Traced(ctx); ok {
		return rec
	}
	return persistence.Record{}
}

// recoverCalls answers the calls of the last turn that an earlier run left
// without results (S9): a Recoverer's call is recovered through its tool,
// as the turn's calls ran (concurrently, within the parallel cap, each
// result checkpointed as it arrives), and any other is answered as
// interrupted. It returns the first append that failed.
func (a *Agent) recoverCalls(ctx context.Context, calls []pendingCall) error {
	var c checkpoints
	var wg sync.WaitGroup
	slots := make(chan struct{}, a.parallel)
	for _, p := range calls {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c.add(ctx, a, a.recoverOne(ctx, p))
		})
	}
	wg.Wait()
	a.orderLastResults()
	return c.failed
}

// recoverOne answers one call an earlier run left without a result, and
// tells OnStep of it as of step 0 (before this run's first model call).
func (a *Agent) recoverOne(ctx context.Context, p pendingCall) Message {
	c := p.call
	t := a.toolNamed(c.Name)
	if _, ok := t.(Recoverer); !ok {
		return interruptedResult(c)
	}
	if a.onStep != nil {
		a.notify(0, subagent.ToolCallStarted, prefix(c.Name, echoLimit)+" "+prefix(c.Args, echoLimit), false, nil)
	}
	var res Message
	if otelx.On() {
		res = a.callToolTraced(withCall(ctx, p.ref), c, t, true)
	} else {
		res = a.callTool(withCall(ctx, p.ref), c, t, true)
	}
	a.notify(0, subagent.ToolCallFinished, c.Name, res.IsError, nil)
	return res
}

// toolNamed is the agent's tool whose spec is named name, or nil.
func (a *Agent) toolNamed(name string) Tool {
	for _, t := range a.tools {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

// interruptedResult answers a call that an earlier run left without a
// result and that cannot be recovered.
func interruptedResult(c ToolCall) Message {
	return errorResult(c.ID, "tool call "+c.Name+" was interrupted before it finished")
}

// generate asks the model for the turn of l.step and takes it (see turn);
// done says whether the run ended, with *res. It is the frame under the
// model call, which holds little more than the call's arguments and
// answer. (res is not in loop: a loop's contents reach the heap, through
// its context, and res would go with them.)
func (l *loop) generate(res *subagent.Result) (done, recorded bool) {
	var resp Response
	var err error
	if otelx.Active() {
		resp, err = l.a.generateObserved(l.ctx, l.step)
	} else {
		resp, err = l.a.model.Generate(l.ctx, l.a.request(l.step))
	}
	if err != nil {
		l.a.modelFailed(l.ctx, l.step, err, res)
		return true, false
	}
	// By value: a pointer to resp would make the compiler keep a second
	// copy of the answer in this frame.
	return l.a.turn(l, resp, res)
}

// generateObserved is the model call of step in its chat span, timed
// for the GenAI metrics (O2); a function of its own, which the compiler
// does not inline, so that the loop's stack stays as it is while they
// are off (O4).
func (a *Agent) generateObserved(ctx context.Context, step int) (Response, error) {
	provider, model := a.modelNames()
	ctx, chat := otelx.StartChat(ctx, provider, model, a.header.SessionID)
	resp, err := a.model.Generate(ctx, a.request(step))
	chat.End(ctx, resp.Usage, resp.StopReason, err)
	return resp, err
}

// modelNames are gen_ai.provider.name and gen_ai.request.model of the
// agent's model calls: the options' choice, else what the model says of
// itself (a model with a Model or GenAIProvider method).
func (a *Agent) modelNames() (provider, model string) {
	provider, model = a.opts.ModelProvider, a.opts.Model
	if model == "" {
		if m, ok := a.model.(interface{ Model() string }); ok {
			model = m.Model()
		}
	}
	if provider == "" {
		provider = "_OTHER" // the conventions' value for one not known
		if m, ok := a.model.(interface{ GenAIProvider() string }); ok {
			provider = m.GenAIProvider()
		}
	}
	return provider, model
}

// modelFailed settles a run whose model call failed.
func (a *Agent) modelFailed(ctx context.Context, step int, err error, res *subagent.Result) {
	a.notify(step, subagent.ModelCallFinished, err.Error(), true, nil)
	if ctx.Err() != nil {
		*res = aborted(ctx)
		return
	}
	*res = subagent.Result{StopReason: subagent.Error, Detail: "agent: model: " + err.Error()}
}

// turn takes the model's answer resp, the turn of l.step: it commits it
// and runs its tool calls, or settles the run with *res. done says
// whether the run ends, recorded is as for loop. The tools offered are
// those of the step's request (a.offers).
func (a *Agent) turn(l *loop, resp Response, res *subagent.Result) (done, recorded bool) {
	ctx, step, corrected := l.ctx, l.step, &l.corrected
	if a.onStep != nil {
		callUsage := resp.Usage // a copy per notification: OnStep may keep it
		a.notify(step, subagent.ModelCallFinished, "", false, &callUsage)
	}
	a.AddUsage(resp.Usage)

	msg := &resp.Message // resp is turn's own copy
	msg.Role = Assistant
	malformed := sanitizeArgs(msg)
	var end *subagent.Result // set when this turn ends the run
	answered := false        // with a final answer, told once durable
	switch {
	case resp.StopReason != "" && resp.StopReason != subagent.Completed:
		// Max-tokens, refusal or a reason a model adds: the turn is over.
		*res = subagent.Result{Output: splitContent(msg), StopReason: resp.StopReason}
		end = res
	case len(msg.ToolCalls) == 0:
		invalid := a.final(msg, res)
		if invalid != nil && !*corrected {
			*corrected = true
			*res = subagent.Result{} // no answer yet
			return a.correct(ctx, msg, invalid, res), false
		}
		res.Output = splitContent(msg)
		end, answered = res, true
	}
	// A final turn and how the run stopped share one append; the tool
	// calls of any other are sanitizeArgs' copy, which the history keeps.
	own := ownCalls
	if end != nil {
		end.Usage = a.usageSoFar()
		own |= ownContent
	}
	if err := a.commit(ctx, end, own, *msg); err != nil {
		*res = a.storeFailed(ctx, err)
		return true, false
	}
	if end != nil {
		if answered && a.onStep != nil {
			// Told only once durable: no unconfirmed output is published,
			// events included (R5).
			a.notify(step, subagent.MessageText, textOf(end.Output), false, nil)
		}
		return true, true
	}
	a.appendMu.Lock()
	a.callsAt = a.seq // the turn's own record: its calls have not started
	a.appendMu.Unlock()
	if err := a.runTools(l.toolCtx(), step, msg.ToolCalls, a.offers, malformed); err != nil {
		*res = a.storeFailed(ctx, err)
		return true, false
	}
	return false, false
}

// runTools runs a turn's tool calls, each result checkpointed as it
// arrives (S9: a crash loses no finished call), and returns the first
// append that failed.
func (a *Agent) runTools(ctx context.Context, step int, calls []ToolCall, offered []offer, malformed []bool) error {
	var c checkpoints
	a.callTools(ctx, step, calls, offered, malformed, func(res Message) { c.add(ctx, a, res) })
	a.orderLastResults()
	return c.failed
}

// checkpoints commits a turn's tool results as they arrive, in group
// commits: the log takes one append at a time (its fence), so results
// that arrive while one is being written go together in the next, and a
// turn of many quick calls costs a few appends, not one each.
type checkpoints struct {
	mu       sync.Mutex
	queue    []Message
	flushing bool
	failed   error // the first append that failed
}

// add queues res; the caller that finds no append under way writes the
// queue until it is empty, so that every result is written before the
// last call returns.
func (c *checkpoints) add(ctx context.Context, a *Agent, res Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, res)
	if c.flushing {
		return
	}
	c.flushing = true
	for len(c.queue) > 0 {
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		// The results are the loop's own: the history keeps their content.
		err := a.commit(ctx, nil, ownContent, batch...)
		c.mu.Lock()
		c.failed = cmp.Or(c.failed, err)
	}
	c.flushing = false
}

// orderResults puts the tool results that follow each assistant turn in
// the order of its calls (F1), whatever order they were checkpointed in.
func orderResults(msgs []Message) {
	for i, m := range msgs {
		if m.Role == Assistant && len(m.ToolCalls) > 1 {
			orderAfter(msgs, i)
		}
	}
}

// orderResults' step for the assistant turn msgs[i].
func orderAfter(msgs []Message, i int) {
	calls := msgs[i].ToolCalls
	if len(calls) < 2 {
		return
	}
	end := i + 1
	for end < len(msgs) && msgs[end].Role == ToolRole {
		end++
	}
	at := make(map[string]int, len(calls))
	for j, c := range calls {
		at[c.ID] = j
	}
	slices.SortStableFunc(msgs[i+1:end], func(x, y Message) int { return at[x.ToolCallID] - at[y.ToolCallID] })
}

// admit takes the pending steer messages and appends them as user turns,
// so that the next request carries them. It is false when the run must end,
// with *res.
func (l *loop) admit(steer SteerSource, res *subagent.Result) bool {
	a, ctx, step := l.a, l.ctx, l.step
	taken, err := steer.Take(ctx)
	if err != nil {
		*res = subagent.Result{StopReason: subagent.Aborted, Detail: "agent: steer: " + err.Error()}
		return false
	}
	if len(taken) == 0 {
		return true
	}
	msgs := make([]Message, len(taken))
	for i, m := range taken {
		msgs[i] = Message{Role: User, Content: m}
	}
	// Their senders were told they were delivered: a cancel arriving now
	// must not lose them (the model just does not see them).
	if err := a.commit(context.WithoutCancel(ctx), nil, ownNothing, msgs...); err != nil {
		*res = a.storeFailed(ctx, err)
		return false
	}
	for _, m := range taken {
		a.notify(step, subagent.SteerAdmitted, firstLine(subagent.TextOf(m)), false, nil)
	}
	if otelx.On() {
		// Here, not where Steer returns: the run may end (and its span
		// with it) before its caller hears the steer was admitted.
		otelx.SteersAdmitted(ctx, len(taken))
	}
	return true
}

// aborted settles a run whose context ended, keeping why (a deadline, a
// cancel) as the Cause.
func aborted(ctx context.Context) subagent.Result {
	cause := context.Cause(ctx)
	return subagent.Result{StopReason: subagent.Aborted, Detail: cause.Error(), Cause: cause}
}

// storeFailed settles a failed append. An append that failed because ctx
// ended is a cancellation, not a storage fault.
func (a *Agent) storeFailed(ctx context.Context, err error) subagent.Result {
	if ctx.Err() != nil {
		return aborted(ctx)
	}
	res := subagent.Result{StopReason: subagent.Error, Detail: "agent: persist turn: " + err.Error()}
	res.Cause = fmt.Errorf("%w: %w", ErrCheckpoint, err)
	return res
}

// correct is the one corrective turn of a final answer that missed the
// output schema (invalid says how): the model sees why and answers again.
// It is true when the run must end, with *res.
func (a *Agent) correct(ctx context.Context, msg *Message, invalid error, res *subagent.Result) bool {
	fix := Message{Role: User, Content: []subagent.ContentBlock{subagent.Text(
		"Your final answer does not match the required JSON schema: " + invalid.Error() +
			". Answer again with only a JSON value that matches it.")}}
	if err := a.commit(ctx, nil, ownNothing, *msg, fix); err != nil {
		*res = a.storeFailed(ctx, err)
		return true
	}
	return false
}

// ErrCheckpoint is matched by the Cause of a run that stopped because the
// log refused a turn, which wraps the store's error too: nothing after the
// last acknowledged turn is durable, so a run's owner must not publish
// output from it (R5).
var ErrCheckpoint = errors.New("agent: a turn could not be made durable")

// interrupted answers, as interrupted, the calls of the history's last
// turn that have no results (see unanswered), so that the model never sees
// a call without a result.
func (a *Agent) interrupted() []Message {
	var out []Message
	for _, p := range a.unanswered() {
		out = append(out, interruptedResult(p.call))
	}
	return out
}

// pendingCall is a call of the history's last turn without a result.
type pendingCall struct {
	call ToolCall
	ref  CallRef
}

// unanswered are the calls of a history whose last turn's calls are not
// all answered: a run stopped while its tools ran (each result was
// checkpointed as it arrived, S9).
func (a *Agent) unanswered() []pendingCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	answered := map[string]bool{}
	for i := len(a.msgs) - 1; i >= 0; i-- {
		switch m := a.msgs[i]; {
		case m.Role == ToolRole:
			answered[m.ToolCallID] = true
		case m.Role == Assistant && len(m.ToolCalls) > 0:
			var out []pendingCall
			for j, c := range m.ToolCalls {
				if !answered[c.ID] {
					out = append(out, pendingCall{call: c, ref: CallRef{Seq: a.callsAt, Index: j}})
				}
			}
			return out
		default:
			return nil
		}
	}
	return nil
}

// empty reports whether the history has no turn.
func (a *Agent) empty() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.msgs) == 0
}

// ownership says which parts of the messages given to commit the loop made
// itself and shares with no one: the history keeps those as they are
// instead of a copy.
type ownership uint8

const (
	ownNothing ownership = 0
	ownContent ownership = 1 // Content
	ownCalls   ownership = 2 // ToolCalls with their arguments
)

// commit persists msgs, followed by the agentlog.KindStop record of stop
// when it is not nil (how the run stopped), in one append, then makes msgs part of
// the history. The history holds what the store decodes, never the
// caller's memory, so a resumed session sees exactly the turns a live one
// did.
func (a *Agent) commit(ctx context.Context, stop *subagent.Result, own ownership, msgs ...Message) error {
	if len(msgs) == 0 && stop == nil {
		return nil
	}
	return a.commitAfter(ctx, stop, own, persistence.Record{}, msgs...)
}

// commitAfter is commit with first, when it has a kind, as the append's
// first record (a log-only one).
func (a *Agent) commitAfter(ctx context.Context, stop *subagent.Result, own ownership, first persistence.Record, msgs ...Message) error {
	b := getBatch()
	defer b.release()
	if first.Kind != "" {
		b.addRecord(first)
	}
	for i := range msgs {
		if err := b.add(&msgs[i], own); err != nil {
			return err
		}
	}
	if stop != nil {
		b.addStop(stop)
	}
	// Appends of concurrent tool calls go to the log and the history in
	// one order.
	a.appendMu.Lock()
	defer a.appendMu.Unlock()
	if err := a.append(ctx, b.records()); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(b.stored); n > 0 {
		// An assistant turn with tool calls is followed by their results
		// and the next turn: room for them too.
		if last := &b.stored[n-1]; stop == nil && last.Role == Assistant && len(last.ToolCalls) > 0 {
			n += len(last.ToolCalls) + 1
		}
		a.msgs = slices.Grow(a.msgs, n)
	}
	for i := range b.stored {
		a.msgs = append(a.msgs, b.stored[i])
		a.settle()
	}
	return nil
}

// orderLastResults puts the results of the history's last turn of tool
// calls in the order of its calls, once they are all in (see
// orderResults).
func (a *Agent) orderLastResults() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].Role == Assistant {
			orderAfter(a.msgs, i)
			return
		}
	}
}

// append adds recs to the log where this activation last saw it end; a
// log another activation took since fails with persistence.ErrConflict.
// Callers hold appendMu.
func (a *Agent) append(ctx context.Context, recs []persistence.Record) error {
	var seq uint64
	var err error
	if o, ok := a.store.(ownStore); ok {
		seq, err = o.AppendOwnAt(jsonv2.Own{}, ctx, a.header.SessionID, a.seq, recs...)
	} else {
		seq, err = a.store.AppendAt(ctx, a.header.SessionID, a.seq, recs...)
	}
	if err != nil {
		return err
	}
	a.seq = seq
	return nil
}

// decoded makes *m what decoding data, its JSON, yields. When every
// string of m is valid UTF-8 that is m with empty slices as nil, deeply
// copied but for the parts own says the loop owns, made without paying
// for a decode; otherwise JSON replaced the invalid bytes and only
// decoding tells how.
func decoded(m *Message, data []byte, own ownership) error {
	valid := utf8.ValidString(string(m.Role)) && utf8.ValidString(m.ToolCallID)
	for _, c := range m.Content {
		valid = valid && utf8.ValidString(c.Type) && utf8.ValidString(c.Text)
	}
	for _, c := range m.ToolCalls {
		valid = valid && utf8.ValidString(c.ID) && utf8.ValidString(c.Name)
	}
	if !valid {
		*m = Message{}
		return json.Unmarshal(data, m)
	}
	switch {
	case len(m.Content) == 0:
		m.Content = nil
	case own&ownContent == 0:
		m.Content = slices.Clone(m.Content)
	}
	switch {
	case len(m.ToolCalls) == 0:
		m.ToolCalls = nil
	case own&ownCalls == 0:
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range m.ToolCalls {
			m.ToolCalls[i].Args = bytes.Clone(m.ToolCalls[i].Args)
		}
	}
	return nil
}

// sanitizeArgs makes the arguments of every tool call of msg compact JSON,
// in memory of the loop's own, and reports the calls whose arguments were
// not JSON (nil when there are none). Arguments are model output, hostile
// input (K3): empty ones become {}, malformed ones are kept as a JSON
// string so the model still sees what it sent, and those calls never
// reach a tool.
func sanitizeArgs(msg *Message) (malformed []bool) {
	msg.ToolCalls = slices.Clone(msg.ToolCalls)
	for i, c := range msg.ToolCalls {
		if len(bytes.TrimSpace(c.Args)) == 0 {
			msg.ToolCalls[i].Args = json.RawMessage(`{}`)
			continue
		}
		buf := bytes.NewBuffer(make([]byte, 0, len(c.Args))) // compact JSON is no longer
		if json.Compact(buf, c.Args) == nil {
			msg.ToolCalls[i].Args = buf.Bytes()
			continue
		}
		quoted, _ := json.Marshal(string(c.Args)) // a string always marshals
		msg.ToolCalls[i].Args = quoted
		if malformed == nil {
			malformed = make([]bool, len(msg.ToolCalls))
		}
		malformed[i] = true
	}
	return malformed
}

// offer is a tool a request offers, under the name its spec had; at is
// its index in the agent's tools (Tool values need not be comparable).
type offer struct {
	name string
	tool Tool
	at   int
}

// request snapshots the model request of step, and the tools it offers
// into a.offers, a.offers[i] being the tool of req.Tools[i], then tells
// OnStep the model call starts. The tools and their specs are asked
// afresh every step; when they are what the last request offered, the two
// share the slices (which are never changed once made).
func (a *Agent) request(step int) (req Request) {
	req = Request{
		MaxTokens: a.opts.MaxTokens,
		OnText:    a.textSink(),
		OnRetry:   a.retrySink(),
	}
	if sh := a.shape; sh != nil {
		req.System, req.OutputSchema = sh.system, sh.schema
	}
	specs, offers := a.offerSpecs, a.offers
	n, fresh := 0, false
	for i, t := range a.tools {
		if c, ok := t.(Conditional); ok && !c.Available(a) {
			continue
		}
		spec := t.Spec()
		if !fresh && n < len(offers) && offers[n].at == i && sameSpec(specs[n], spec) {
			n++
			continue
		}
		if !fresh {
			// The offer departs from the last one here: new slices from
			// the part the two share.
			specs = append(make([]ToolSpec, 0, len(a.tools)), specs[:n]...)
			offers = append(make([]offer, 0, len(a.tools)), offers[:n]...)
			fresh = true
		}
		specs = append(specs, spec)
		offers = append(offers, offer{name: spec.Name, tool: t, at: i})
		n++
	}
	if n == 0 {
		specs, offers = nil, nil
	}
	specs, offers = specs[:n:n], offers[:n:n]
	a.offerSpecs, a.offers = specs, offers
	req.Tools = specs
	a.mu.Lock()
	// Turns are never modified once appended, so the model shares the
	// history instead of a copy per step (a step's cost must not grow with
	// the history); capping the capacity keeps a model's append from
	// writing into the loop's next turn.
	req.Messages = a.msgs[:len(a.msgs):len(a.msgs)]
	a.mu.Unlock()
	a.textStep = int32(step)
	a.notify(step, subagent.ModelCallStarted, "", false, nil)
	return req
}

// sameSpec reports whether a and b describe a tool alike.
func sameSpec(a, b ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description &&
		bytes.Equal(a.Parameters, b.Parameters) && (a.Parameters == nil) == (b.Parameters == nil)
}

// offeredTool is the tool offered under name; the last one when several
// were (a tool whose spec's name changed after New).
func offeredTool(offered []offer, name string) Tool {
	for i := len(offered) - 1; i >= 0; i-- {
		if offered[i].name == name {
			return offered[i].tool
		}
	}
	return nil
}

// splitContent gives the result and the history each a copy of msg's
// content, made in one allocation: it returns the result's and leaves msg
// with the history's, which the loop then owns.
func splitContent(msg *Message) []subagent.ContentBlock {
	n := len(msg.Content)
	if n == 0 {
		return slices.Clone(msg.Content)
	}
	both := make([]subagent.ContentBlock, 2*n)
	copy(both, msg.Content)
	copy(both[n:], msg.Content)
	msg.Content = both[n : 2*n : 2*n]
	return both[:n:n]
}

// final settles, in *res, a model answer without tool calls, but for its
// Output; invalid says why it misses the output schema, if it does.
func (a *Agent) final(msg *Message, res *subagent.Result) (invalid error) {
	*res = subagent.Result{StopReason: subagent.Completed}
	if a.shape == nil || a.shape.compiled == nil {
		return nil
	}
	compiled, text := a.shape.compiled, textOf(msg.Content)
	structured, err := schema.Validate(compiled, text)
	if err != nil {
		res.StopReason, res.Detail = subagent.Error, "agent: "+err.Error()
		return err
	}
	res.Structured = structured
	return nil
}

// textOf is subagent.TextOf, without a copy of a lone block's text.
func textOf(blocks []subagent.ContentBlock) string {
	if len(blocks) == 1 {
		return blocks[0].Text
	}
	return subagent.TextOf(blocks)
}

// callTools runs calls concurrently, at most the agent's parallel cap at
// once, and puts their results in call order in results. The calls share
// ctx, so cancelling the parent cancels them all (F1).
func (a *Agent) callTools(ctx context.Context, step int, calls []ToolCall, offered []offer, malformed []bool, done func(Message)) {
	if len(calls) == 1 {
		// A lone call runs on the loop's goroutine: no goroutine to
		// start, no fresh stack to grow.
		done(a.callOne(ctx, step, 0, calls[0], offered, malformed != nil && malformed[0]))
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, a.parallel)
	for i, c := range calls {
		if malformed != nil && malformed[i] {
			done(a.callOne(ctx, step, i, c, offered, true))
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			done(a.callOne(ctx, step, i, c, offered, false))
		})
	}
	wg.Wait()
}

// callOne runs call i of a turn and tells OnStep of it; a malformed one
// never reaches its tool.
func (a *Agent) callOne(ctx context.Context, step, i int, c ToolCall, offered []offer, malformed bool) Message {
	if a.onStep != nil {
		// Cut before joining: a huge argument is not copied for a line.
		a.notify(step, subagent.ToolCallStarted, prefix(c.Name, echoLimit)+" "+prefix(c.Args, echoLimit), false, nil)
	}
	var res Message
	if malformed {
		res = errorResult(c.ID, "tool "+c.Name+": arguments are not valid JSON")
	} else {
		tctx := withCall(ctx, CallRef{Seq: a.callsAt, Index: i})
		if otelx.On() {
			res = a.callToolTraced(tctx, c, offeredTool(offered, c.Name), false)
		} else {
			res = a.callTool(tctx, c, offeredTool(offered, c.Name), false)
		}
	}
	a.notify(step, subagent.ToolCallFinished, c.Name, res.IsError, nil)
	return res
}

// callToolTraced is callTool in the call's execute_tool span (O2): a
// delegate tool starts its child under it, so the child's run span is its
// child (O1).
func (a *Agent) callToolTraced(ctx context.Context, c ToolCall, t Tool, recovering bool) Message {
	ctx, span := otelx.StartTool(ctx, c.Name, c.ID)
	res := a.callTool(ctx, c, t, recovering)
	otelx.EndTool(span, res.IsError)
	return res
}

// callTool runs one call, or recovers it (see Recoverer). Tools are user
// code: a panic becomes an error result instead of taking the process
// down.
func (a *Agent) callTool(ctx context.Context, c ToolCall, t Tool, recovering bool) (res Message) {
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
	// The history keeps c.Args: the tool gets a copy of its own.
	var out string
	var err error
	if recovering {
		out, err = t.(Recoverer).Recover(ctx, a, bytes.Clone(c.Args))
	} else {
		out, err = t.Call(ctx, a, bytes.Clone(c.Args))
	}
	if recovering && errors.Is(err, ErrInterrupted) {
		return interruptedResult(c)
	}
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
	return schema.ValidateArgs(s, args)
}

// errorResult is a failed call's result. Its text is cut to echoLimit: an
// error often quotes the model's arguments (a path, an unknown name or
// property), and echoing megabytes back would cost the conversation them
// twice for nothing (K3).
func errorResult(id, text string) Message {
	return Message{Role: ToolRole, ToolCallID: id, IsError: true, Content: []subagent.ContentBlock{subagent.Text(prefix(text, echoLimit))}}
}

// echoLimit is the most bytes of a model's own input (a tool call's name
// and arguments) that an error result or a tool-call-started progress
// event repeats; the rest is counted, not copied.
const echoLimit = 4 << 10

// prefix is s when it has at most n bytes, else its first n bytes (never
// cutting a rune) and how many were left out.
func prefix[T ~string | ~[]byte](s T, n int) string {
	if len(s) <= n {
		return string(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:n], len(s)-n)
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
