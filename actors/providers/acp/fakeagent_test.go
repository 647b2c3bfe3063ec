package acp_test

// The fake ACP agent: the test binary re-executed with ACPTEST_FAKE set to
// a mode. It speaks ACP with the SDK's agent side and runs each prompt as
// a script, one command a line (see (*fakeAgent).run), so that every test
// says exactly what its agent does.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit/acptest"
)

// Environment of the fake agent.
const (
	envMode    = "ACPTEST_FAKE"    // its startup mode; unset in the test process
	envStarts  = "ACPTEST_STARTS"  // a file it appends a line to when it starts
	envPidFile = "ACPTEST_PIDFILE" // where "grandchild" writes its grandchild's pid
	envReport  = "ACPTEST_REPORT"  // a unix socket "floodask" reports on
)

// Startup modes.
const (
	modeNormal     = "normal"      // no loadSession
	modeLoadable   = "loadable"    // advertises loadSession and replays history on load
	modeExitEarly  = "exit-early"  // writes to stderr and exits 3 before reading anything
	modeBadVersion = "bad-version" // answers initialize with protocol version 99
	modeHangInit   = "hang-init"   // never answers initialize
	modeHangNew    = "hang-new"    // answers initialize, never session/new
	modeStubborn   = "stubborn"    // ignores SIGTERM and the end of its input
	modeGrandchild = "grandchild"  // starts a grandchild that ignores SIGTERM and holds stdout
	modeRunaway    = "runaway"     // starts a grandchild that ignores SIGTERM and leaves the group (setsid)
	modeSleeper    = "sleeper"     // the grandchild itself
)

// runFakeAgent is the fake agent's main.
func runFakeAgent(mode string) int {
	if f := os.Getenv(envStarts); f != "" {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(fh, mode, os.Getpid())
			_ = fh.Close()
		}
	}
	switch mode {
	case modeSleeper:
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "ready") // to the agent that started us
		blockForever()
	case modeExitEarly:
		fmt.Fprintln(os.Stderr, "fake agent: cannot start")
		return 3
	case modeStubborn:
		signal.Ignore(syscall.SIGTERM)
	case modeGrandchild, modeRunaway:
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envMode+"="+modeSleeper)
		if mode == modeRunaway {
			cmd.SysProcAttr = detached()
		} else {
			cmd.Stdout = os.Stdout // holds our output open after we are gone
		}
		ready, err := cmd.StderrPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		// Only once it ignores SIGTERM is it the grandchild tests want.
		if _, err := bufio.NewReader(ready).ReadString('\n'); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		_ = os.WriteFile(os.Getenv(envPidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	}
	// Non-blocking, so that a write can have a deadline ("floodask").
	if err := syscall.SetNonblock(1, true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	stdout := os.NewFile(1, "stdout")
	out := &lockedWriter{w: stdout, f: stdout}
	a := &fakeAgent{mode: mode, out: out, in: &gatedReader{r: os.Stdin, gate: make(chan struct{})}}
	a.conn = sdk.NewAgentSideConnection(a, out, a.in)
	<-a.conn.Done()
	if mode == modeStubborn {
		blockForever()
	}
	return 0
}

// lockedWriter lets raw lines and the SDK's messages share stdout, whole
// lines each.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
	f  *os.File // w, for write deadlines
}

// gatedReader is the agent's input, which "floodask" stops reading.
type gatedReader struct {
	r    io.Reader
	once sync.Once
	gate chan struct{} // closed once reading stops
}

func (g *gatedReader) Read(p []byte) (int, error) {
	select {
	case <-g.gate:
		blockForever()
	default:
	}
	return g.r.Read(p)
}

func (g *gatedReader) stop() { g.once.Do(func() { close(g.gate) }) }

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

type fakeAgent struct {
	acptest.Unscripted
	mode   string
	out    *lockedWriter
	in     *gatedReader
	conn   *sdk.AgentSideConnection
	mu     sync.Mutex
	loaded sdk.SessionId
	// opened is the _meta of the session/new or session/load that opened
	// the session ("meta" reports it).
	opened map[string]any
}

func (a *fakeAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	switch a.mode {
	case modeHangInit:
		blockForever()
	case modeBadVersion:
		return sdk.InitializeResponse{ProtocolVersion: 99}, nil
	}
	return sdk.InitializeResponse{
		ProtocolVersion:   sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: a.mode == modeLoadable},
	}, nil
}

func (a *fakeAgent) NewSession(_ context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if a.mode == modeHangNew {
		blockForever()
	}
	a.mu.Lock()
	a.opened = p.Meta
	a.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(fmt.Sprintf("fake-%d", os.Getpid()))}, nil
}

// LoadSession replays an earlier turn, as agents do, before answering.
func (a *fakeAgent) LoadSession(_ context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	a.mu.Lock()
	a.loaded, a.opened = p.SessionId, p.Meta
	a.mu.Unlock()
	for _, u := range []sdk.SessionUpdate{
		sdk.UpdateUserMessageText("OLD PROMPT"),
		sdk.UpdateAgentMessageText("OLD ANSWER"),
		sdk.StartToolCall("old-call", "OLD TOOL", sdk.WithStartStatus(sdk.ToolCallStatusCompleted)),
	} {
		_ = a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: p.SessionId, Update: u})
	}
	return sdk.LoadSessionResponse{}, nil
}

// Prompt runs the prompt's text as a script. ctx ends on session/cancel.
func (a *fakeAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	var script strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			script.WriteString(b.Text.Text)
			script.WriteByte('\n')
		}
	}
	s := &turn{a: a, ctx: ctx, sid: p.SessionId, stop: sdk.StopReasonEndTurn, meta: p.Meta}
	sc := bufio.NewScanner(strings.NewReader(script.String()))
	for sc.Scan() {
		if err := s.run(strings.TrimSpace(sc.Text())); err != nil {
			return sdk.PromptResponse{}, err
		}
		// A stubborn agent never answers a cancel, however early it
		// comes: the test's cancel may reach it before this check.
		if ctx.Err() != nil && a.mode != modeStubborn {
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		}
	}
	return sdk.PromptResponse{StopReason: s.stop, Usage: s.usage}, nil
}

type turn struct {
	a     *fakeAgent
	ctx   context.Context
	sid   sdk.SessionId
	stop  sdk.StopReason
	usage *sdk.Usage
	meta  map[string]any // the prompt's _meta
}

func (s *turn) update(u sdk.SessionUpdate) {
	// Not the prompt's ctx: a cancelled turn still reports.
	_ = s.a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: s.sid, Update: u})
}

func (s *turn) say(text string) { s.update(sdk.UpdateAgentMessageText(text)) }

func (s *turn) raw(line string) {
	_, _ = s.a.out.Write([]byte(line + "\n"))
}

// code is a request error's JSON-RPC code, or "ok".
func code(err error) string {
	var re *sdk.RequestError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &re):
		return strconv.Itoa(re.Code)
	}
	return err.Error()
}

// run executes one command of a prompt script.
func (s *turn) run(line string) error {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "":
	case "say":
		s.say(arg)
	case "think":
		s.update(sdk.UpdateAgentThoughtText(arg))
	case "tool": // tool ID KIND TITLE
		f := strings.SplitN(arg, " ", 3)
		s.update(sdk.StartToolCall(sdk.ToolCallId(f[0]), f[2], sdk.WithStartKind(sdk.ToolKind(f[1])), sdk.WithStartStatus(sdk.ToolCallStatusPending)))
	case "done", "fail":
		status := sdk.ToolCallStatusCompleted
		if cmd == "fail" {
			status = sdk.ToolCallStatusFailed
		}
		s.update(sdk.UpdateToolCall(sdk.ToolCallId(arg), sdk.WithUpdateStatus(status)))
	case "plan":
		s.update(sdk.UpdatePlan(
			sdk.PlanEntry{Content: "look", Status: sdk.PlanEntryStatusCompleted, Priority: sdk.PlanEntryPriorityHigh},
			sdk.PlanEntry{Content: "answer", Status: sdk.PlanEntryStatusPending, Priority: sdk.PlanEntryPriorityLow},
		))
	case "ask", "ask-noallow", "ask-noreject": // ask KIND TITLE
		kind, title, _ := strings.Cut(arg, " ")
		opts := []sdk.PermissionOption{
			{Kind: sdk.PermissionOptionKindAllowAlways, Name: "Always", OptionId: "allow-always"},
			{Kind: sdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow-once"},
			{Kind: sdk.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject-once"},
		}
		switch cmd {
		case "ask-noallow":
			opts = opts[2:]
		case "ask-noreject":
			opts = opts[:2]
		}
		resp, err := s.a.conn.RequestPermission(context.Background(), sdk.RequestPermissionRequest{
			SessionId: s.sid, Options: opts,
			ToolCall: sdk.ToolCallUpdate{ToolCallId: "perm-call", Title: sdk.Ptr(title), Kind: sdk.Ptr(sdk.ToolKind(kind))},
		})
		switch {
		case err != nil:
			s.say("perm-error:" + code(err) + ";")
		case resp.Outcome.Selected != nil:
			s.say("perm:selected:" + string(resp.Outcome.Selected.OptionId) + ";")
		default:
			s.say("perm:cancelled;")
		}
	case "read", "readl": // read PATH | readl PATH LINE LIMIT
		req := sdk.ReadTextFileRequest{SessionId: s.sid, Path: arg}
		if cmd == "readl" {
			f := strings.Fields(arg)
			line, _ := strconv.Atoi(f[1])
			limit, _ := strconv.Atoi(f[2])
			req.Path, req.Line, req.Limit = f[0], &line, &limit
		}
		resp, err := s.a.conn.ReadTextFile(context.Background(), req)
		if err != nil {
			s.say("read-error:" + code(err) + ";")
		} else {
			s.say("read:" + resp.Content + ";")
		}
	case "write": // write PATH CONTENT
		path, content, _ := strings.Cut(arg, " ")
		_, err := s.a.conn.WriteTextFile(context.Background(), sdk.WriteTextFileRequest{SessionId: s.sid, Path: path, Content: content})
		s.say("write:" + code(err) + ";")
	case "terminal":
		_, err := s.a.conn.CreateTerminal(context.Background(), sdk.CreateTerminalRequest{SessionId: s.sid, Command: "true"})
		s.say("terminal:" + code(err) + ";")
	case "ext":
		_, err := s.a.conn.CallExtension(context.Background(), "_fake/ext", map[string]any{})
		s.say("ext:" + code(err) + ";")
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok {
			v = "<unset>"
		}
		s.say("env:" + arg + "=" + v + ";")
	case "cwd":
		wd, _ := os.Getwd()
		s.say("cwd:" + wd + ";")
	case "session":
		s.a.mu.Lock()
		loaded := s.a.loaded
		s.a.mu.Unlock()
		s.say("session:" + string(s.sid) + " loaded:" + string(loaded) + ";")
	case "raw":
		s.raw(arg)
	case "readmany": // readmany N PATH: N reads, 8 at a time
		n, path, _ := strings.Cut(arg, " ")
		s.say("readmany:" + s.many(atoi(n), 8, func() error {
			_, err := s.a.conn.ReadTextFile(context.Background(), sdk.ReadTextFileRequest{SessionId: s.sid, Path: path})
			return err
		}))
	case "readflood": // readflood N PATH: N reads at once
		n, path, _ := strings.Cut(arg, " ")
		s.say("readflood:" + s.many(atoi(n), atoi(n), func() error {
			_, err := s.a.conn.ReadTextFile(context.Background(), sdk.ReadTextFileRequest{SessionId: s.sid, Path: path})
			return err
		}))
	case "bigtools": // bigtools N SIZE: N tool calls left open, SIZE-byte titles, 4 KB ids
		n, size, _ := strings.Cut(arg, " ")
		// Written raw, the line built once: marshalling it anew each time
		// would make the test slow, not the node.
		head := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"tool_call","toolCallId":"`, s.sid)
		tail := `-` + strings.Repeat("i", 4096) + `","title":"` + strings.Repeat("T", atoi(size)) + `","kind":"read","status":"pending"}}}`
		for i := range atoi(n) {
			s.raw(head + strconv.Itoa(i) + tail)
		}
	case "floodask": // floodask N: stop reading, then write N permission requests
		s.floodAsk(atoi(arg))
	case "garbage":
		s.raw("this is not json")
		s.raw(`{"jsonrpc":"2.0","method":`)
		s.raw(`[1,2,3]`)
		s.raw(`{"jsonrpc":"2.0"}`)
		s.raw(`{"jsonrpc":"2.0","method":"session/update","params":"not an object"}`)
	case "unknown":
		s.raw(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"hologram","content":{"type":"text","text":"UNKNOWN"}}}}`, s.sid))
		s.raw(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"hologram","text":"HOLO"}}}}`, s.sid))
		s.raw(`{"jsonrpc":"2.0","method":"_fake/notice","params":{}}`)
		s.raw(`{"jsonrpc":"2.0","method":"fake/unknown","params":{}}`)
	case "orphan":
		s.raw(`{"jsonrpc":"2.0","id":987654,"result":{"stopReason":"end_turn"}}`)
		s.raw(`{"jsonrpc":"2.0","id":"nobody","error":{"code":-32000,"message":"stray"}}`)
	case "overlong":
		line := strings.Repeat("x", acp.MaxLine+1024)
		s.raw(line)
	case "flood": // flood N
		n, _ := strconv.Atoi(arg)
		chunk := strings.Repeat("f", 100)
		for range n {
			s.say(chunk)
		}
	case "wait":
		<-s.ctx.Done()
	case "hang":
		blockForever()
	case "crash":
		n, _ := strconv.Atoi(arg)
		fmt.Fprintln(os.Stderr, "fake agent: crashing on purpose")
		os.Exit(n)
	case "stop":
		s.stop = sdk.StopReason(arg)
	case "usage":
		s.usage = &sdk.Usage{InputTokens: 11, OutputTokens: 7, TotalTokens: 18, CachedReadTokens: sdk.Ptr(3)}
	case "error":
		return &sdk.RequestError{Code: -32042, Message: arg, Data: map[string]any{"why": "scripted"}}
	case "meta": // the trace context of the session's opening and of this prompt (O3)
		s.a.mu.Lock()
		opened := s.a.opened
		s.a.mu.Unlock()
		s.say(fmt.Sprintf("meta:open=%v/%v prompt=%v/%v;", opened["traceparent"], opened["tracestate"], s.meta["traceparent"], s.meta["tracestate"]))
	case "pid":
		s.say("pid:" + strconv.Itoa(os.Getpid()) + ";")
	default:
		s.say("unknown-command:" + cmd + ";")
	}
	return nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// many runs call n times, at most par at once, and says how the calls
// ended: "<n> ok <n> refused <n> bounded <n> other;", refused being
// invalid params (the client's refusal of a path), bounded an internal
// error carrying a retry (a bound of the client's).
func (s *turn) many(n, par int, call func() error) string {
	var mu sync.Mutex
	counts := map[string]int{}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := call()
			kind := "other"
			var re *sdk.RequestError
			switch {
			case err == nil:
				kind = "ok"
			case errors.As(err, &re) && re.Code == -32602:
				kind = "refused"
			case errors.As(err, &re) && re.Code == -32603 && strings.Contains(err.Error(), "retry"):
				kind = "bounded"
			}
			mu.Lock()
			counts[kind]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%d ok %d refused %d bounded %d other;", counts["ok"], counts["refused"], counts["bounded"], counts["other"])
}

// floodAsk stops reading the agent's input, then writes n permission
// requests as fast as the client takes them, and reports on the socket
// envReport: "blocked K" once a write has waited a second (the client
// stopped reading after K requests; the flood goes on), "wrote N" at the
// end.
func (s *turn) floodAsk(n int) {
	report, err := net.Dial("unix", os.Getenv(envReport))
	if err != nil {
		s.say("floodask:" + err.Error() + ";")
		return
	}
	defer report.Close()
	s.a.in.stop()
	w := s.a.out
	w.mu.Lock()
	defer w.mu.Unlock()
	blocked := false
	for i := range n {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"flood-%d","method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"t%d","title":"Flood","kind":"read"},"options":[{"kind":"allow_once","name":"Allow","optionId":"allow"}]}}`+"\n", i, s.sid, i)
		if !blocked {
			_ = w.f.SetWriteDeadline(time.Now().Add(time.Second))
		}
		m, err := io.WriteString(w.f, line)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			blocked = true
			fmt.Fprintf(report, "blocked %d\n", i)
			_ = w.f.SetWriteDeadline(time.Time{})
			_, err = io.WriteString(w.f, line[m:])
		}
		if err != nil {
			return // the client closed our output
		}
	}
	fmt.Fprintf(report, "wrote %d\n", n)
}

// blockForever blocks until the process is killed. A bare select{} would
// not: with no other goroutine left, the runtime ends the program as
// deadlocked; a pending timer keeps it waiting.
func blockForever() {
	<-time.NewTimer(time.Duration(math.MaxInt64)).C
}
