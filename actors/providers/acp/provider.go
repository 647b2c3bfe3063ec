package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/agentproc"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// provider starts ACP agents as children (P3). It declares none of the
// start-time capabilities (the agent owns its tools and persona), and its
// children do not see their parent's turns (P5). It is safe for
// concurrent use.
type provider struct {
	cfg Config
	log *slog.Logger
}

var (
	_ subagent.Provider = (*provider)(nil)
	_ subagent.Resumer  = (*provider)(nil)
)

// New returns an ACP provider, also a subagent.Resumer. It checks the
// configuration's shape; the working directory is checked at each Start,
// since it may appear later.
func New(cfg Config) (subagent.Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Args, cfg.Env = slices.Clone(cfg.Args), maps.Clone(cfg.Env)
	return &provider{cfg: cfg, log: cfg.System.ActorSystem().Logger().With("provider", cfg.Name)}, nil
}

// Name implements subagent.Provider.
func (p *provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none.
func (p *provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: an ACP child starts
// from its prompt alone (P5).
func (p *provider) InheritsParentContext() bool { return false }

// OutOfProcess makes its children's run spans CLIENT spans (otelx, O2):
// the child is another process.
func (p *provider) OutOfProcess() bool { return true }

// Start implements subagent.Provider. It launches the agent in its own
// process group, runs initialize (protocol version 1) and session/new,
// and, with a Store, writes the child's descriptor as the first record of
// a session named by the run id; it returns once the agent's session
// exists, and the turn runs on. On any failure, including ctx ending,
// nothing it made remains: the process is ended on the shutdown ladder
// and reaped, and the session row removed (R6). A working directory that
// cannot be used fails with ErrDir before any process starts.
func (p *provider) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	if err := p.check(req); err != nil {
		return nil, err
	}
	dir, err := workingDir(p.cfg.Dir)
	if err != nil {
		return nil, err
	}
	c := p.child(scope, req, dir)
	if p.cfg.Store != nil {
		c.storeSession = c.runID
	}
	return p.launch(ctx, c)
}

// continuePrompt is the prompt of a resumed activation whose request
// has none: its parent's process died while the child's turn ran, and the
// child goes on with it.
const continuePrompt = "Your previous turn was interrupted before it finished. Continue it, and answer as you would have."

// Resume implements subagent.Resumer: it continues the child named by the
// request's continuation through session/load, in the directory its
// session belongs to, then prompts. The agent's replay of the earlier
// history stays out of the new output and events. The descriptor comes
// from the continuation or, when it carries none, from Config.Store. A
// child whose agent did not advertise loadSession when it started fails
// with subagent.ErrNotResumable before any process starts.
func (p *provider) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	cont := req.Continuation
	if cont == nil || cont.SessionID == "" {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: "resume needs a continuation naming a session"}
	}
	if len(req.Prompt) == 0 {
		// An ACP turn needs a prompt: an empty one continues the
		// interrupted turn, as it does an in-process child's (S9).
		req.Prompt = []subagent.ContentBlock{subagent.Text(continuePrompt)}
	}
	if err := p.check(req); err != nil {
		return nil, err
	}
	d, err := p.descriptor(ctx, cont)
	if err != nil {
		return nil, err
	}
	if d.Provider != p.Name() {
		return nil, &subagent.InvalidRequestError{Field: "continuation", Reason: fmt.Sprintf("the child was started by provider %q, not %q", d.Provider, p.Name())}
	}
	pd, err := acpdata.ParseProviderData(d.ProviderData)
	if err != nil {
		return nil, err
	}
	if !pd.LoadSession {
		return nil, &acpdata.NotResumableError{Reason: "its agent did not advertise loadSession when the child started"}
	}
	dir, err := workingDir(pd.Cwd)
	if err != nil {
		return nil, err
	}
	c := p.child(scope, req, dir)
	c.resume, c.storeSession = &pd, cont.SessionID
	if p.cfg.Store != nil {
		if err := c.take(ctx); err != nil {
			return nil, err
		}
	}
	return p.launch(ctx, c)
}

// take takes the child's store session for this activation, before its
// agent starts: an earlier activation still holding it can no longer
// append (agentlog.KindActivation, as in-process children do).
func (c *child) take(ctx context.Context) error {
	_, entries, err := c.p.cfg.Store.LoadFrom(ctx, c.storeSession, 0)
	if err != nil {
		return &subagent.InvalidRequestError{Field: "continuation", Reason: fmt.Sprintf("session %q: %v", c.storeSession, err), Fault: err}
	}
	var last uint64
	if n := len(entries); n > 0 {
		last = entries[n-1].Seq
	}
	prompt, err := c.promptRecord()
	if err != nil {
		return err
	}
	act := agentlog.Untraced()
	if otelx.On() {
		// ctx carries this activation's run span: linked to the earlier
		// one's, and recorded for the next one's link (O3).
		otelx.LinkEarlier(ctx, agentlog.LastTrace(entries))
		act, _ = agentlog.Traced(ctx)
	}
	c.seq, err = c.p.cfg.Store.AppendAt(ctx, c.storeSession, last, act, prompt)
	return err
}

// promptRecord is the activation's prompt as a user turn of the child's
// session, stored with the record that begins the activation, so that
// listings show an ACP child's turns as any other's; its answer is in
// the stop record (see recordStop).
func (c *child) promptRecord() (persistence.Record, error) {
	data, err := json.Marshal(agent.Message{Role: agent.User, Content: c.req.Prompt})
	return persistence.Record{Kind: persistence.KindMessage, Data: data}, err
}

// descriptor is the continuation's descriptor, or the first one in the
// child's log.
func (p *provider) descriptor(ctx context.Context, c *subagent.Continuation) (descriptor.Descriptor, error) {
	if len(c.Descriptor) > 0 {
		return descriptor.Parse(c.Descriptor)
	}
	if p.cfg.Store == nil {
		return descriptor.Descriptor{}, &subagent.InvalidRequestError{Field: "continuation", Reason: "it carries no descriptor and the provider has no store to find one in"}
	}
	_, recs, err := p.cfg.Store.Load(ctx, c.SessionID)
	if err != nil {
		return descriptor.Descriptor{}, &subagent.InvalidRequestError{Field: "continuation", Reason: fmt.Sprintf("session %q: %v", c.SessionID, err), Fault: err}
	}
	return descriptor.Fold(recs)
}

// check refuses, before anything exists, what an ACP child cannot do. The
// Service refuses the same features; a direct caller gets the same
// answer.
func (p *provider) check(req subagent.StartRequest) error {
	if isNil(req.Parent) {
		return &subagent.InvalidRequestError{Field: "parent", Reason: "a delegating parent agent is required"}
	}
	if strings.TrimSpace(subagent.TextOf(req.Prompt)) == "" {
		return &subagent.InvalidRequestError{Field: "prompt", Reason: "an ACP turn needs a prompt"}
	}
	return rules.CheckCapabilities(p.Name(), p.Capabilities(), req)
}

func (p *provider) child(scope subagent.Scope, req subagent.StartRequest, dir string) *child {
	runID := scope.RunID
	if runID == "" {
		runID = ids.New()
	}
	scope.RunID = runID
	return &child{
		p: p, req: req, scope: scope, runID: runID, dir: dir,
		ready: make(chan error, 1),
		log:   slog.New(truncating{p.log.Handler()}).With("run", runID),
	}
}

// launch runs c under a run actor whose body sets the agent up and runs
// the turn, and waits for the setup: it publishes the run once the
// agent's session exists, or disposes it (which ends the process) and
// removes what the setup stored.
func (p *provider) launch(ctx context.Context, c *child) (subagent.Run, error) {
	h := run.Start(p.cfg.System, run.Spec{
		Scope:     c.scope,
		SessionID: c.storeSession,
		Ctx:       ctx,
		Body:      c.body,
		Release:   c.release,
	})
	var err error
	select {
	case err = <-c.ready:
	case <-ctx.Done():
	}
	if err == nil {
		err = setupEnded(ctx, c.req.Parent)
	}
	if err != nil {
		rollback := context.WithoutCancel(ctx)
		errs := []error{err, h.Dispose(rollback)}
		// Read after Dispose: the body that set it has returned.
		if c.created.Load() {
			errs = append(errs, p.cfg.Store.Delete(rollback, c.storeSession))
		}
		return nil, errors.Join(errs...)
	}
	return &childRun{h: h, c: c}, nil
}

// childRun is an ACP child's activation. It is deliberately not a
// subagent.Steerer: ACP has no way to add a message to a turn in flight,
// so the Service offers no Steer for it and send_message to a live ACP
// child is refused rather than queued (R4).
type childRun struct {
	h run.Run
	c *child
}

var _ subagent.Run = (*childRun)(nil)

// ID implements subagent.Run.
func (r *childRun) ID() string { return r.h.ID() }

// SessionID implements subagent.Run: the store session holding the
// child's descriptor, "" when the provider has no Store.
func (r *childRun) SessionID() string { return r.h.SessionID() }

// LocalAgent implements subagent.Run: an ACP child is no in-process agent.
func (r *childRun) LocalAgent() subagent.Agent { return nil }

// Wait implements subagent.Run.
func (r *childRun) Wait(ctx context.Context) (subagent.Result, error) { return r.h.Wait(ctx) }

// OnSettled implements subagent.Run.
func (r *childRun) OnSettled(f func(subagent.Result, error)) { r.h.OnSettled(f) }

// Dispose implements subagent.Run: a turn in flight is cancelled (see
// Config.CancelWait), then the agent is ended on the shutdown ladder and
// reaped with whatever it started in its process group. Idempotent and
// safe to call concurrently.
func (r *childRun) Dispose(ctx context.Context) error { return r.h.Dispose(ctx) }

// ProcessID is the agent's process id, which is also its process group
// id: the group is gone once Dispose has returned.
func (r *childRun) ProcessID() int { return int(r.c.pid.Load()) }

// AgentSessionID is the agent's own id for the session (ACP's sessionId).
func (r *childRun) AgentSessionID() string { return string(r.c.session) }

// child is one activation's state. The body goroutine sets it up and
// runs the turn; release runs on the same goroutine after the body, so
// the fields set during setup need no lock there.
type child struct {
	p            *provider
	req          subagent.StartRequest
	scope        subagent.Scope // the Service's, its RunID runID
	runID        string
	dir          string
	resume       *acpdata.ProviderData // set on Resume
	storeSession string
	// seq is where this activation last saw its store session end: its
	// stop record is conditioned on it, so an activation that lost the
	// session to a newer one writes nothing (S8's one writer). Set
	// before the run starts.
	seq uint64
	log *slog.Logger

	ready   chan error // the setup's outcome, sent once
	pid     atomic.Int64
	created atomic.Bool // the store session exists

	// Set during setup; read after ready by childRun's accessors.
	proc    *agentproc.Proc
	conn    *sdk.ClientSideConnection
	frames  *frames // the agent's output on its way to conn
	srv     *server // answers the agent's requests
	cl      *client
	session sdk.SessionId
	// initTook is how long initialize took.
	initTook time.Duration
	wg       sync.WaitGroup // the session/cancel sender
}

// body is the run's goroutine: setup, then one prompt turn.
func (c *child) body(ctx context.Context, _ run.Gate) (subagent.Result, error) {
	signalled := false
	defer func() {
		if !signalled { // a panic during setup: Start must not wait forever
			c.ready <- &startError{Step: "setup", Err: errors.New("the provider's setup panicked")}
		}
	}()
	err := c.setup(ctx)
	c.ready <- err
	signalled = true
	if err != nil {
		// Nobody reads this result: Start disposes the run.
		return subagent.Result{StopReason: subagent.Error, Detail: err.Error()}, nil
	}
	res := c.turn(ctx)
	c.recordStop(ctx, res)
	return res, nil
}

// recordStop appends how the turn stopped to the child's session, when
// there is one, as the agent loop does for in-process children
// (agentlog.KindStop), so that listings show the child's state. It is
// informational: a failure leaves the result as it is.
func (c *child) recordStop(ctx context.Context, res subagent.Result) {
	if c.p.cfg.Store == nil || c.storeSession == "" {
		return
	}
	// The answer too: the turns are in the agent's session, not ours, and
	// a parent that died before it stored the answer reads it here (S9).
	data, err := json.Marshal(agentlog.Stop{StopReason: res.StopReason, Detail: res.Detail, Usage: res.Usage, Output: res.Output})
	if err == nil {
		_, err = c.p.cfg.Store.AppendAt(context.WithoutCancel(ctx), c.storeSession, c.seq, persistence.Record{Kind: agentlog.KindStop, Data: data})
	}
	if errors.Is(err, persistence.ErrConflict) {
		c.log.Warn("subagent: a newer activation took the child's session; its stop is not recorded", "session", c.storeSession)
	}
}

// setup launches the agent and opens (or loads) its session, within
// Config.StartTimeout.
func (c *child) setup(ctx context.Context) error {
	cfg := c.p.cfg
	cl, err := newClient(cfg, c.dir, c.runID, c.scope.Events)
	if err != nil {
		return err
	}
	c.cl = cl
	proc, err := agentproc.Launch(cfg.Command, cfg.Args, c.dir, childEnv(os.Environ(), cfg.Env), cfg.StopWait, cfg.Journal, c.log)
	if err != nil {
		return &startError{Step: "launch", Err: err}
	}
	c.proc = proc
	c.pid.Store(int64(proc.PID()))
	c.srv = newServer(cl, proc.Stdin(), cfg.WriteTimeout, c.log)
	c.frames = newFrames(proc.Stdout(), c.srv, c.log)
	c.conn = sdk.NewClientSideConnection(unserved{}, c.srv.out, c.frames)
	c.conn.SetLogger(c.log)
	c.frames.open()

	sctx, cancel := context.WithTimeoutCause(ctx, cfg.StartTimeout, fmt.Errorf("%w: no answer within %s", errStartTimeout, cfg.StartTimeout))
	defer cancel()
	sctx, stop := c.untilExit(sctx)
	defer stop()
	begun := time.Now()

	init, err := c.conn.Initialize(sctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{
			Fs: sdk.FileSystemCapabilities{ReadTextFile: cfg.ReadFiles, WriteTextFile: cfg.WriteFiles},
		},
		ClientInfo: &sdk.Implementation{Name: "subactor", Version: "1"},
	})
	if err != nil {
		return c.startError("initialize", err, sctx)
	}
	if init.ProtocolVersion != sdk.ProtocolVersionNumber {
		return c.startError("initialize", fmt.Errorf("%w: the agent answered version %d, we speak %d",
			errProtocolVersion, init.ProtocolVersion, sdk.ProtocolVersionNumber), sctx)
	}
	// Said when the next step runs out of time: the limit is the whole
	// start's, and the step that used it up is not always the one named.
	c.initTook = time.Since(begun)
	loadable := init.AgentCapabilities.LoadSession
	if c.resume != nil {
		if !loadable {
			return &acpdata.NotResumableError{Reason: "the agent no longer advertises loadSession"}
		}
		c.session = sdk.SessionId(c.resume.SessionID)
		cl.listen(c.session, true)
		if _, err := c.conn.LoadSession(sctx, sdk.LoadSessionRequest{
			SessionId: c.session, Cwd: c.dir, McpServers: []sdk.McpServer{},
			Meta: otelx.Meta(ctx, nil),
		}); err != nil {
			return c.startError("session/load", err, sctx)
		}
		// The SDK has handed us every update the agent sent before its
		// answer, so the replay is over: what follows is this turn's.
		cl.listen(c.session, false)
		return nil
	}
	// The run's trace context goes with each session request (O3), at
	// _meta's root keys, as ACP's extensibility convention has it.
	ns, err := c.conn.NewSession(sctx, sdk.NewSessionRequest{Cwd: c.dir, McpServers: []sdk.McpServer{}, Meta: otelx.Meta(ctx, nil)})
	if err != nil {
		return c.startError("session/new", err, sctx)
	}
	if ns.SessionId == "" {
		return c.startError("session/new", errors.New("the agent answered no session id"), sctx)
	}
	c.session = ns.SessionId
	cl.listen(c.session, false)
	if cfg.Store != nil {
		return c.store(sctx, acpdata.ProviderData{SessionID: string(ns.SessionId), LoadSession: loadable, Cwd: c.dir})
	}
	return nil
}

// store creates the child's session with its descriptor (D1), the agent's
// session id in its provider data.
func (c *child) store(ctx context.Context, pd acpdata.ProviderData) error {
	raw, err := pd.Encode()
	if err != nil {
		return &startError{Step: "store", Err: err}
	}
	rec, err := descriptor.Descriptor{Provider: c.p.Name(), ProviderData: raw}.Record()
	if err != nil {
		return &startError{Step: "store", Err: err}
	}
	h := subagent.SessionHeader{
		SessionID:       c.storeSession,
		ParentSessionID: c.req.Parent.SessionID(),
		DelegationDepth: subagent.DelegationDepthOf(c.req.Parent) + 1,
	}
	prompt, err := c.promptRecord()
	if err != nil {
		return &startError{Step: "store", Err: err}
	}
	recs := []persistence.Record{rec, prompt}
	if otelx.On() {
		// The first activation's run span, for the next one's link (O3).
		if act, ok := agentlog.Traced(ctx); ok {
			recs = []persistence.Record{rec, act, prompt}
		}
	}
	seq, err := c.p.cfg.Store.CreateWith(context.WithoutCancel(ctx), h, recs...)
	if err != nil {
		return &startError{Step: "store", Err: err}
	}
	c.seq = seq
	c.created.Store(true)
	return nil
}

// untilExit returns ctx ended (with ErrAgentExited) a short grace after
// the agent process exits: an agent that died leaving a process that
// holds its output open would otherwise never be noticed.
func (c *child) untilExit(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-c.proc.Exited():
		case <-done:
			return
		}
		select {
		case <-time.After(agentproc.ExitGrace):
			cancel(ErrAgentExited)
		case <-done:
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// startError describes a failed setup step with how the agent ended, if
// it did.
func (c *child) startError(step string, err error, ctx context.Context) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
	}
	if bad := c.frames.failure(); bad != nil {
		err = bad
	}
	if step != "initialize" && errors.Is(err, errStartTimeout) {
		err = fmt.Errorf("%w (initialize answered after %s)", err, c.initTook.Round(time.Millisecond))
	}
	// A write that failed (a broken pipe, say) usually means the agent is
	// exiting: give its exit a moment to show, so the error says how it
	// ended rather than only what the write saw.
	select {
	case <-c.proc.Exited():
	case <-c.conn.Done():
	case <-time.After(agentproc.ExitGrace):
	}
	exit, stderr := c.ending()
	return &startError{Step: step, Err: err, Exit: exit, Stderr: stderr}
}

// ending says how the agent process ended and what it last wrote on
// stderr, once the connection is gone; "" while it still runs.
func (c *child) ending() (exit, stderr string) {
	select {
	case <-c.conn.Done():
		c.proc.ExitedWithin(c.p.cfg.StopWait)
	case <-c.proc.Exited():
	default:
		return "", ""
	}
	exit = c.proc.ExitStatus()
	if exit != "" {
		// Its last words may still be in the pipe.
		select {
		case <-c.proc.Drained():
		case <-time.After(agentproc.ExitGrace):
		}
	}
	return exit, strings.TrimSpace(c.proc.Stderr())
}

// promptAnswer is session/prompt's outcome.
type promptAnswer struct {
	resp sdk.PromptResponse
	err  error
}

// turn runs one session/prompt. When ctx ends (a cancel, a Dispose) the
// turn is cancelled the ACP way: session/cancel goes out from another
// goroutine while the prompt's own context stays alive, and the agent's
// answer is awaited for Config.CancelWait.
func (c *child) turn(ctx context.Context) subagent.Result {
	pctx, hardStop := context.WithCancel(context.Background())
	defer hardStop()
	done := make(chan promptAnswer, 1)
	meta := otelx.Meta(ctx, nil) // the run's trace context (O3)
	go func() {
		resp, err := c.conn.Prompt(pctx, sdk.PromptRequest{SessionId: c.session, Prompt: blocks(c.req.Prompt), Meta: meta})
		done <- promptAnswer{resp, err}
	}()
	// abandon gives up on the agent's answer; closing its input (the
	// ladder's first rung) also unblocks a write it is not reading.
	abandon := func() promptAnswer {
		hardStop()
		c.proc.CloseStdin()
		return <-done
	}
	select {
	case a := <-done:
		return c.result(a)
	case <-c.srv.out.stalled:
		abandon()
		return subagent.Result{
			StopReason: subagent.Error, Output: c.cl.answer(), Cause: ErrAgentNotReading,
			Detail: fmt.Sprintf("agent server %q stopped reading its input: a write to it waited %s (write_timeout), so its turn was abandoned and its processes are ended", c.p.cfg.Name, c.p.cfg.WriteTimeout),
		}
	case <-c.proc.Exited():
		// A crash: what it wrote before dying may still be on its way.
		select {
		case a := <-done:
			return c.result(a)
		case <-time.After(agentproc.ExitGrace):
			a := abandon()
			a.err = errors.Join(ErrAgentExited, a.err)
			return c.result(a)
		}
	case <-ctx.Done():
	}
	cause := context.Cause(ctx)
	c.cl.cancel() // pending and later permission requests: "cancelled"
	c.wg.Go(func() {
		// May block on a full pipe until the ladder closes stdin.
		_ = c.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: c.session})
	})
	res := subagent.Result{StopReason: subagent.Aborted, Cause: cause}
	select {
	case a := <-done:
		switch {
		case a.err != nil:
			res.Detail = "cancelled; the agent's turn ended with an error: " + describe(a.err)
		case a.resp.StopReason == sdk.StopReasonCancelled:
			res.Detail = "cancelled; the agent stopped its turn"
		default:
			res.Detail = fmt.Sprintf("cancelled; the agent ended its turn with %q", a.resp.StopReason)
		}
		res.Usage = usage(a.resp.Usage)
	case <-time.After(c.p.cfg.CancelWait):
		abandon()
		res.Detail = fmt.Sprintf("cancelled; the agent did not answer session/cancel within %s, so its turn was abandoned", c.p.cfg.CancelWait)
		res.Cause = errors.Join(cause, ErrCancelUnanswered)
	}
	res.Output = c.cl.answer()
	return res
}

// result maps the agent's answer to the turn onto the run's result.
func (c *child) result(a promptAnswer) subagent.Result {
	if a.err != nil {
		res := subagent.Result{StopReason: subagent.Error, Output: c.cl.answer(), Cause: a.err}
		if bad := c.frames.failure(); bad != nil {
			res.Detail, res.Cause = bad.Error()+"; the connection was closed", errors.Join(bad, a.err)
			return res
		}
		if exit, stderr := c.ending(); exit != "" {
			res.Detail = fmt.Sprintf("the agent process ended during the turn (%s)", exit)
			if stderr != "" {
				res.Detail += "; stderr: " + stderr
			}
			if !errors.Is(a.err, ErrAgentExited) {
				res.Cause = errors.Join(ErrAgentExited, a.err)
			}
			return res
		}
		res.Detail = "the agent answered the prompt with an error: " + describe(a.err)
		return res
	}
	reason, detail := stopResult(a.resp.StopReason)
	if reason == subagent.Completed {
		c.cl.finalText()
	}
	return subagent.Result{Output: c.cl.answer(), StopReason: reason, Detail: detail, Usage: usage(a.resp.Usage)}
}

// describe keeps an agent's error in its own words, JSON-RPC code and
// data included, within bounds.
func describe(err error) string {
	return truncate(err.Error(), maxEventText)
}

// release frees the child after the body returned: no more updates count,
// the process is ended on the ladder, and the connection's reader, the
// handlers of the agent's requests and our cancel sender have returned.
func (c *child) release() {
	if c.cl != nil {
		c.cl.close()
	}
	if c.proc != nil {
		c.proc.Stop()
	}
	if c.conn != nil {
		c.frames.open() // in case setup stopped between the two
		<-c.conn.Done()
		c.srv.close()
		if n := c.frames.dropped.Load(); n > loggedDrops {
			c.log.Warn("acp: dropped lines from the agent", "count", n)
		}
	}
	c.wg.Wait()
}

// blocks is a prompt as ACP content blocks.
func blocks(prompt []subagent.ContentBlock) []sdk.ContentBlock {
	out := make([]sdk.ContentBlock, 0, len(prompt))
	for _, b := range prompt {
		out = append(out, sdk.TextBlock(b.Text))
	}
	return out
}

// usage is the agent's report of a turn's tokens, where it gives one.
func usage(u *sdk.Usage) *subagent.Usage {
	if u == nil {
		return nil
	}
	out := &subagent.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	if u.CachedReadTokens != nil {
		out.CachedInputTokens = *u.CachedReadTokens
	}
	return out
}

// setupEnded reports why a start must roll back: its context ended, or its
// parent closed (checked directly too, since a context bound to the
// parent's lifetime learns of the close asynchronously).
func setupEnded(ctx context.Context, parent subagent.Agent) error {
	if err := rules.ParentClosed(parent); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return subagent.Cancelled(context.Cause(ctx))
	}
	return nil
}

// isNil reports a nil interface or one holding a nil pointer.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
