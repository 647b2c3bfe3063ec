package main

// node mcp: the node as an MCP server (X2), for MCP hosts (Claude Code,
// Codex, Gemini CLI, Cursor): over stdio, or over streamable HTTP with
// -listen (loopback unless TLS, as the cluster's members: netguard). Its
// tools delegate through the configured providers (the node's own
// children, spawn, and the -config file's agent servers): delegate
// (foreground, or in the background as a continuable child), send, tasks,
// task_result, kill and providers. Each MCP session (the one of stdio, or
// each HTTP client's) has its own children: those of a top-level session
// in the data directory, made at its first tool call and closed, with
// every child, when the MCP session ends. A foreground delegation's events
// go out as progress notifications when the client gave a progress token,
// and notifications/cancelled cancels it.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/netguard"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// kindMCP marks the log-only record an MCP session's parent starts with:
// the directory its children work in.
const kindMCP = "node/mcp"

// mcpSessionRecord is the data of a kindMCP record.
type mcpSessionRecord struct {
	Dir string `json:"dir"`
}

// Bounds of node mcp (K3), beside maxFrame and maxConcurrent.
const (
	// maxWait is the longest a task_result call waits for its task.
	maxWait = 10 * time.Minute
	// maxClients is the most MCP sessions one node mcp -listen holds at
	// once; a new one past it is refused (503).
	maxClients = 16
	// callRate and callBurst bound one MCP session's tool calls: a
	// burst of callBurst, then callRate a second; one past it is refused.
	callRate  = 20
	callBurst = 40
	// idleSession closes an HTTP client's MCP session it has not used
	// for that long (with its children).
	idleSession = 30 * time.Minute
)

// listenOptions are node mcp's -listen flags.
type listenOptions struct {
	addr                   string
	tlsCert, tlsKey, tlsCA string
}

func listenFlags(fs *flag.FlagSet, l *listenOptions) {
	fs.StringVar(&l.addr, "listen", "", "serve MCP over streamable HTTP on `HOST:PORT` instead of stdio (beyond loopback only with -tls-cert and -tls-key)")
	fs.StringVar(&l.tlsCert, "tls-cert", "", "with -listen, serve HTTPS with this certificate `FILE` (PEM)")
	fs.StringVar(&l.tlsKey, "tls-key", "", "with -listen, the key `FILE` (PEM) of -tls-cert")
	fs.StringVar(&l.tlsCA, "tls-ca", "", "with -listen and TLS, require client certificates from the CA in `FILE` (PEM)")
}

// check checks the flags: -listen's address (netguard), and TLS files
// given together and only with -listen.
func (l listenOptions) check() error {
	tls := l.tlsCert != "" || l.tlsKey != ""
	switch {
	case l.addr == "" && (tls || l.tlsCA != ""):
		return errors.New("-tls-cert, -tls-key and -tls-ca serve HTTPS: give -listen too")
	case tls && (l.tlsCert == "" || l.tlsKey == ""):
		return errors.New("TLS needs -tls-cert and -tls-key together")
	case l.tlsCA != "" && !tls:
		return errors.New("-tls-ca needs -tls-cert and -tls-key")
	case l.addr == "":
		return nil
	}
	if err := netguard.Check(l.addr, tls); err != nil {
		if errors.Is(err, netguard.ErrInsecure) {
			return fmt.Errorf("%w (-tls-cert, -tls-key): MCP clients start agents on this node", err)
		}
		return err
	}
	return nil
}

// mcpCommand runs node mcp until the client disconnects (stdin ends), or
// with -listen until a stop signal: MCP frames on stdout (or HTTP), logs
// on stderr.
func mcpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var l listenOptions
	o, code, ok := parseFace("mcp", args, stdout, stderr, &l)
	if !ok {
		return code
	}
	if err := l.check(); err != nil {
		fmt.Fprintf(stderr, "%s mcp: %v\n", prog, err)
		return exitUsage
	}
	var tlsConfig *tls.Config
	if l.tlsCert != "" {
		var err error
		if tlsConfig, err = netguard.ServerTLS(l.tlsCert, l.tlsKey, l.tlsCA); err != nil {
			fmt.Fprintf(stderr, "%s mcp: %v\n", prog, err)
			return exitUsage
		}
	}
	dir, err := os.Getwd()
	if err == nil {
		dir, err = readableDir(dir)
	}
	if err != nil {
		return failed(stderr, "mcp", err)
	}
	f, err := openFace(ctx, o, stderr)
	if err != nil {
		return faceFailed(stderr, "mcp", err)
	}
	defer f.close()
	s := newMCPServer(ctx, f, dir)
	defer s.close()
	if l.addr != "" {
		if err := s.serveHTTP(l.addr, tlsConfig, stderr); err != nil {
			return failed(stderr, "mcp", err)
		}
		return exitOK
	}
	t := &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}, MaxLineLength: maxFrame}
	if err := s.server.Run(s.base, t); err != nil && s.base.Err() == nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "%s mcp: %v\n", prog, err)
	}
	return exitOK
}

// serveHTTP serves MCP over streamable HTTP on addr until the server's
// context ends. It says where on stderr ("node mcp: listening on
// http://ADDR/"), once it listens.
func (s *mcpServer) serveHTTP(addr string, tlsConfig *tls.Config, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      idleSession,
		MaxRequestBodyBytes: maxFrame,
		Logger:              logger(io.Discard),
	})
	srv := &http.Server{
		// A browser's cross-origin request (a page the user visits
		// posting to the node) is refused; MCP hosts send none.
		Handler:           http.NewCrossOriginProtection().Handler(s.admitHTTP(handler)),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.base },
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "%s mcp: listening on %s://%s/\n", prog, scheme, ln.Addr())
	done := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			done <- srv.ServeTLS(ln, "", "")
		} else {
			done <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return err
	case <-s.base.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	_ = srv.Close()
	<-done
	return nil
}

// admitHTTP refuses a new MCP session (a request without a session id)
// while maxClients are open, or whose body is over maxFrame, read here
// before the SDK makes a session of it (which would otherwise hold a
// place until it idled out) (K3).
func (s *mcpServer) admitHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Method == http.MethodPost {
			n := 0
			for range s.server.Sessions() {
				n++
			}
			if n >= maxClients {
				http.Error(w, fmt.Sprintf("at most %d MCP sessions may be open at once", maxClients), http.StatusServiceUnavailable)
				return
			}
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFrame))
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", maxFrame), http.StatusRequestEntityTooLarge)
				return
			case err != nil:
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// nopWriteCloser is stdout as the transport's writer: the transport
// closing does not close it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpServer is node mcp's server: its tools, and the children of each MCP
// session.
type mcpServer struct {
	server *mcp.Server
	f      *face
	dir    string
	// base ends when the server does: every delegation ends with it.
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	clients map[*mcp.ServerSession]*mcpClient
	closed  bool
	// ending counts the sessions that ended on their own and are still
	// closing their children (close waits for them).
	ending sync.WaitGroup
}

// mcpClient is one MCP session's children: a tree and the parent session
// they delegate from.
type mcpClient struct {
	tree   *delegationTree
	parent *agent.Agent
	events subagent.Subscription
	calls  *rate.Limiter
	// base ends when the MCP session does.
	base context.Context
	stop context.CancelFunc
	// inflight are the delegations in flight, at most maxConcurrent.
	inflight sync.WaitGroup
	running  atomic.Int32
	close    func()

	mu       sync.Mutex
	watchers map[string]func(subagent.Event) // by run id
}

// newMCPServer makes the server; its sessions' children work in dir.
func newMCPServer(ctx context.Context, f *face, dir string) *mcpServer {
	base, stop := context.WithCancel(ctx)
	s := &mcpServer{f: f, dir: dir, base: base, stop: stop, clients: map[*mcp.ServerSession]*mcpClient{}}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "subactor", Version: moduleVersion()}, &mcp.ServerOptions{
		Instructions: "Delegate self-contained tasks to child agents: providers lists them, delegate runs one.",
		Logger:       logger(io.Discard),
	})
	s.server.AddReceivingMiddleware(s.bound)
	s.addTools()
	return s
}

// bound refuses a tool call past its session's rate (K3), and makes the
// session's children at its first one.
func (s *mcpServer) bound(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			c, err := s.client(ctx, ss)
			if err != nil {
				return nil, err
			}
			if !c.calls.Allow() {
				return nil, fmt.Errorf("over %d tool calls a second (a burst of %d): retry later", callRate, callBurst)
			}
		}
		return next(ctx, method, req)
	}
}

// client is the children of MCP session ss, made at its first call and
// closed when it ends.
func (s *mcpServer) client(ctx context.Context, ss *mcp.ServerSession) (*mcpClient, error) {
	if ss == nil {
		return nil, errors.New("no MCP session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[ss]; c != nil {
		return c, nil
	}
	if s.closed {
		return nil, errors.New("the server is closing")
	}
	if len(s.clients) >= maxClients {
		return nil, fmt.Errorf("at most %d MCP sessions may delegate at once", maxClients)
	}
	c, err := s.newClient(ctx)
	if err != nil {
		return nil, err
	}
	s.clients[ss] = c
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return // close closes c
		}
		delete(s.clients, ss)
		s.ending.Add(1)
		s.mu.Unlock()
		c.close()
		s.ending.Done()
	}()
	return c, nil
}

// newClient makes an MCP session's tree and parent session.
func (s *mcpServer) newClient(ctx context.Context) (*mcpClient, error) {
	t, err := s.f.tree(s.dir, newProgress(io.Discard), nil)
	if err != nil {
		return nil, err
	}
	maxDepth := s.f.o.maxDepth
	parent, err := standInParent(context.WithoutCancel(ctx), s.f.store, kindMCP, mcpSessionRecord{Dir: s.dir}, subagent.AgentOptions{MaxDepth: &maxDepth, ModelProvider: s.f.m.endpoint, Model: s.f.m.name})
	if err != nil {
		t.close()
		return nil, err
	}
	base, stop := context.WithCancel(s.base)
	c := &mcpClient{tree: t, parent: parent, base: base, stop: stop, calls: rate.NewLimiter(callRate, callBurst), watchers: map[string]func(subagent.Event){}}
	c.events = t.svc.ListenParent(parent.SessionID(), c.event)
	// Every delegation in flight is cancelled and awaited, then the tree
	// (killing the background children) and the parent close.
	c.close = sync.OnceFunc(func() {
		s.mu.Lock()
		c.stop() // under the lock enter admits under
		s.mu.Unlock()
		c.inflight.Wait()
		c.events.Release()
		c.tree.close()
		c.parent.Close()
	})
	return c, nil
}

// close ends every MCP session's children.
func (s *mcpServer) close() {
	s.stop()
	s.mu.Lock()
	s.closed = true
	clients := slices.Collect(maps.Values(s.clients))
	s.mu.Unlock()
	for _, c := range clients {
		c.close()
	}
	// A session that ended just before (stdin closing ends the stdio
	// one) may still be killing its children: the node exits after.
	s.ending.Wait()
}

// of is the children of the session of a tool call (made by bound).
func (s *mcpServer) of(ctx context.Context, r *mcp.CallToolRequest) (*mcpClient, error) {
	return s.client(ctx, r.Session)
}

// standInParent is a top-level session whose children a command delegates
// itself, without a model turn of its own (its model is a stand-in): it
// starts with the log-only record kind holding rec.
func standInParent(ctx context.Context, store persistence.Store, kind string, rec any, opts subagent.AgentOptions) (*agent.Agent, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return agent.New(ctx, agent.Config{
		Store:   store,
		Model:   scripted.New(),
		Header:  subagent.SessionHeader{SessionID: ids.New()},
		LogOnly: []persistence.Record{{Kind: kind, Data: data}},
		Options: opts,
	})
}

// event passes a child's event to the delegation watching its run.
func (c *mcpClient) event(ev subagent.Event) error {
	var run string
	switch ev := ev.(type) {
	case subagent.RunStarted:
		run = ev.RunID
	case subagent.RunProgress:
		run = ev.RunID
	case subagent.RunEnded:
		run = ev.RunID
	}
	c.mu.Lock()
	w := c.watchers[run]
	c.mu.Unlock()
	if w != nil {
		w(ev)
	}
	return nil
}

// The tools' arguments.
type (
	mcpDelegateArgs struct {
		Provider     string         `json:"provider" jsonschema:"the provider to delegate to (see the providers tool)"`
		Prompt       string         `json:"prompt" jsonschema:"the child's task, saying everything it needs"`
		OutputSchema map[string]any `json:"output_schema,omitempty" jsonschema:"an object-rooted JSON Schema the child's answer must satisfy; the result is then structured"`
		Background   bool           `json:"background,omitempty" jsonschema:"run the child in the background as a continuable child: the answer is its task and child ids, for task_result, kill and send"`
	}
	mcpSendArgs struct {
		ChildID string `json:"child_id" jsonschema:"a background child's id, from delegate"`
		Message string `json:"message" jsonschema:"the follow-up"`
	}
	mcpTaskArgs struct {
		TaskID string `json:"task_id" jsonschema:"a task id, from delegate or send"`
	}
	mcpResultArgs struct {
		TaskID      string `json:"task_id" jsonschema:"a task id, from delegate or send"`
		WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the task to end, at most 600; 0 answers at once"`
	}
	mcpNoArgs struct{}
)

// addTools adds the server's tools.
func (s *mcpServer) addTools() {
	mcp.AddTool(s.server, &mcp.Tool{Name: "delegate", Description: "Delegate a self-contained task to a child agent of a provider and wait for its answer (structured when output_schema is given), or start it in the background."}, s.delegate)
	mcp.AddTool(s.server, &mcp.Tool{Name: "send", Description: "Send a follow-up message to a background child: it is steered if running, or resumed with the message as a new task."}, s.send)
	mcp.AddTool(s.server, &mcp.Tool{Name: "tasks", Description: "List the background tasks of this server's session."}, s.tasks)
	mcp.AddTool(s.server, &mcp.Tool{Name: "task_result", Description: "A background task's state and, once it ended, its result; waits up to wait_seconds for it to end."}, s.taskResult)
	mcp.AddTool(s.server, &mcp.Tool{Name: "kill", Description: "Stop a background task."}, s.kill)
	mcp.AddTool(s.server, &mcp.Tool{Name: "providers", Description: "The providers children can be delegated to, with their capabilities."}, s.providers)
}

// mcpProvider is a provider as the providers tool lists it.
type mcpProvider struct {
	Name                  string                `json:"name"`
	Capabilities          subagent.Capabilities `json:"capabilities"`
	InheritsParentContext bool                  `json:"inheritsParentContext"`
	Resumes               bool                  `json:"resumes"`
}

func (s *mcpServer) providers(ctx context.Context, r *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	var out []mcpProvider
	for _, name := range c.tree.svc.List() {
		p, ok := c.tree.svc.GetProvider(name)
		if !ok {
			continue
		}
		_, resumes := p.(subagent.Resumer)
		out = append(out, mcpProvider{Name: name, Capabilities: p.Capabilities(), InheritsParentContext: p.InheritsParentContext(), Resumes: resumes})
	}
	return toolJSON(map[string]any{"providers": out, "session": c.parent.SessionID()})
}

// toolJSON is a tool result holding v as JSON text and as structured
// content.
func toolJSON(v any) (*mcp.CallToolResult, any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: json.RawMessage(data)}, nil, nil
}

// enter admits a delegation (K3: at most maxConcurrent at once, none once
// the session closes); the returned func ends it. Admitted under the
// server's lock, so that close (which takes it) never waits for a
// delegation admitted after it began waiting.
func (c *mcpClient) enter(s *mcpServer) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.base.Err() != nil {
		return nil, errors.New("the session is closing")
	}
	if c.running.Add(1) > maxConcurrent {
		c.running.Add(-1)
		return nil, fmt.Errorf("at most %d delegations may run at once", maxConcurrent)
	}
	c.inflight.Add(1)
	return func() { c.running.Add(-1); c.inflight.Done() }, nil
}

// request checks a delegation's arguments (K3) and makes its request.
func (c *mcpClient) request(a mcpDelegateArgs) (subagent.StartRequest, error) {
	req := subagent.StartRequest{Parent: c.parent, Prompt: []subagent.ContentBlock{subagent.Text(a.Prompt)}}
	switch {
	case a.Prompt == "":
		return req, errors.New("prompt is empty")
	case len(a.Prompt) > maxPromptBytes:
		return req, errPromptTooLarge
	}
	if _, ok := c.tree.svc.GetProvider(a.Provider); !ok {
		return req, fmt.Errorf("no provider %q (configured: %v)", a.Provider, c.tree.svc.List())
	}
	if a.OutputSchema != nil {
		data, err := json.Marshal(a.OutputSchema)
		if err != nil {
			return req, err
		}
		if len(data) > maxPromptBytes {
			return req, fmt.Errorf("output_schema is over %d bytes", maxPromptBytes)
		}
		req.OutputSchema = data
	}
	return req, nil
}

func (s *mcpServer) delegate(ctx context.Context, r *mcp.CallToolRequest, a mcpDelegateArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	req, err := c.request(a)
	if err != nil {
		return nil, nil, err
	}
	done, err := c.enter(s)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	// A host that traces hands its span in _meta (O3).
	ctx = otelx.FromMeta(ctx, r.Params.Meta)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.base, cancel)()
	if a.Background {
		bg, err := c.tree.svc.StartContinuable(ctx, a.Provider, req)
		if err != nil {
			return nil, nil, err
		}
		return toolJSON(map[string]any{"kind": "background", "taskId": bg.Task.ID, "childId": bg.ChildID})
	}
	runID := ids.New()
	if token := r.Params.GetProgressToken(); token != nil {
		c.watch(ctx, runID, r.Session, token)
		defer c.unwatch(runID)
	}
	run, err := c.tree.svc.StartAs(ctx, a.Provider, req, runID)
	if err != nil {
		return nil, nil, err
	}
	res, err := run.Wait(context.WithoutCancel(ctx))
	if derr := run.Dispose(context.WithoutCancel(ctx)); err == nil {
		err = derr
	}
	if err != nil {
		return nil, nil, err
	}
	// The run's last events have been sent before the answer.
	if err := c.events.Flush(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, err
	}
	return childResult(res, run.SessionID()), nil, nil
}

// childResult is a child's result as a tool result: its output as text,
// its structured output as structured content, an error result unless it
// completed.
func childResult(res subagent.Result, session string) *mcp.CallToolResult {
	text := subagent.TextOf(res.Output)
	out := &mcp.CallToolResult{Meta: mcp.Meta{"stopReason": string(res.StopReason), "childId": session}}
	if res.StopReason != subagent.Completed {
		out.IsError = true
		text = fmt.Sprintf("the child ended %s: %s\n%s", res.StopReason, res.Detail, text)
	}
	out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	if len(res.Structured) > 0 {
		out.StructuredContent = res.Structured
	}
	return out
}

// watch sends run's events to the client as progress notifications on
// token until unwatch.
func (c *mcpClient) watch(ctx context.Context, run string, session *mcp.ServerSession, token any) {
	var n int
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchers[run] = func(ev subagent.Event) {
		var msg string
		switch ev := ev.(type) {
		case subagent.RunStarted:
			msg = "started " + ev.Provider + ": " + ev.Task
		case subagent.RunProgress:
			msg = stepText(ev)
		case subagent.RunEnded:
			msg = "ended " + string(ev.StopReason)
		}
		if msg == "" {
			return
		}
		n++
		_ = session.NotifyProgress(context.WithoutCancel(ctx), &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
	}
}

func (c *mcpClient) unwatch(run string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watchers, run)
}

func (s *mcpServer) send(ctx context.Context, r *mcp.CallToolRequest, a mcpSendArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case a.Message == "":
		return nil, nil, errors.New("message is empty")
	case len(a.Message) > maxPromptBytes:
		return nil, nil, errPromptTooLarge
	}
	d, err := c.tree.svc.SendMessage(ctx, c.parent, a.ChildID, []subagent.ContentBlock{subagent.Text(a.Message)}, "mcp")
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{"route": string(d.Route)}
	if d.Task.ID != "" {
		out["taskId"] = d.Task.ID
	}
	return toolJSON(out)
}

func (s *mcpServer) tasks(ctx context.Context, r *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	list, err := c.tree.mgr.List(ctx, c.parent.SessionID())
	if err != nil {
		return nil, nil, err
	}
	out := make([]jsonTask, len(list))
	for i, t := range list {
		out[i] = jsonTaskOf(t)
	}
	return toolJSON(map[string]any{"tasks": out})
}

func (s *mcpServer) taskResult(ctx context.Context, r *mcp.CallToolRequest, a mcpResultArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	var t tasks.Task
	if wait := time.Duration(a.WaitSeconds) * time.Second; wait > 0 {
		t, err = c.tree.mgr.Collect(ctx, c.parent.SessionID(), a.TaskID, min(wait, maxWait))
	} else {
		t, err = c.tree.mgr.Get(ctx, c.parent.SessionID(), a.TaskID)
	}
	if err != nil {
		return nil, nil, err
	}
	out := struct {
		jsonTask
		Output     string          `json:"output,omitempty"`
		Structured json.RawMessage `json:"structured,omitempty"`
	}{jsonTask: jsonTaskOf(t)}
	if t.Result != nil {
		out.Output, out.Structured = subagent.TextOf(t.Result.Output), t.Result.Structured
	}
	return toolJSON(out)
}

func (s *mcpServer) kill(ctx context.Context, r *mcp.CallToolRequest, a mcpTaskArgs) (*mcp.CallToolResult, any, error) {
	c, err := s.of(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.tree.mgr.Kill(ctx, c.parent.SessionID(), a.TaskID)
	if err != nil {
		return nil, nil, err
	}
	return toolJSON(jsonTaskOf(t))
}
