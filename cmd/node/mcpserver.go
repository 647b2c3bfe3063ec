package main

// node mcp: the node as an MCP server over stdio (X2), for MCP hosts
// (Claude Code, Codex, Gemini CLI, Cursor). Its tools delegate through the
// configured providers (the node's own children, spawn, and the -config
// file's agent servers): delegate (foreground, or in the background as a
// continuable child), send, tasks, task_result, kill and providers. The
// children are those of one top-level session in the data directory, made
// for the server; a foreground delegation's events go out as progress
// notifications when the client gave a progress token, and
// notifications/cancelled cancels it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// kindMCP marks the log-only record an MCP server's session starts with:
// the directory its children work in.
const kindMCP = "node/mcp"

// mcpSessionRecord is the data of a kindMCP record.
type mcpSessionRecord struct {
	Dir string `json:"dir"`
}

// maxWait is the longest a task_result call waits for its task.
const maxWait = 10 * time.Minute

// mcpCommand runs node mcp until the client disconnects (stdin ends) or
// a stop signal: MCP frames on stdout, logs on stderr.
func mcpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseFace("mcp", args, stdout, stderr)
	if !ok {
		return code
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
	s, err := newMCPServer(ctx, f, dir)
	if err != nil {
		return failed(stderr, "mcp", err)
	}
	defer s.close()
	t := &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}, MaxLineLength: maxFrame}
	if err := s.server.Run(s.base, t); err != nil && s.base.Err() == nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "%s mcp: %v\n", prog, err)
	}
	return exitOK
}

// nopWriteCloser is stdout as the transport's writer: the transport
// closing does not close it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpServer is one MCP client's server.
type mcpServer struct {
	server *mcp.Server
	tree   *delegationTree
	parent *agent.Agent
	events subagent.Subscription
	// base ends when the server does: every delegation ends with it.
	base context.Context
	stop context.CancelFunc
	// calls are the delegations in flight, at most maxConcurrent.
	calls   sync.WaitGroup
	running atomic.Int32

	mu       sync.Mutex
	watchers map[string]func(subagent.Event) // by run id
}

// newMCPServer makes the server's tree, working in dir, and its parent
// session.
func newMCPServer(ctx context.Context, f *face, dir string) (*mcpServer, error) {
	t, err := f.tree(dir, newProgress(io.Discard), nil)
	if err != nil {
		return nil, err
	}
	maxDepth := f.o.maxDepth
	parent, err := standInParent(ctx, f.store, kindMCP, mcpSessionRecord{Dir: dir}, subagent.AgentOptions{MaxDepth: &maxDepth, ModelProvider: f.m.endpoint, Model: f.m.name})
	if err != nil {
		t.close()
		return nil, err
	}
	base, stop := context.WithCancel(ctx)
	s := &mcpServer{tree: t, parent: parent, base: base, stop: stop, watchers: map[string]func(subagent.Event){}}
	s.events = t.svc.ListenParent(parent.SessionID(), s.event)
	s.server = mcp.NewServer(&mcp.Implementation{Name: "subactor", Version: moduleVersion()}, &mcp.ServerOptions{
		Instructions: "Delegate self-contained tasks to child agents: providers lists them, delegate runs one. Session " + parent.SessionID() + ".",
		Logger:       logger(io.Discard),
	})
	s.addTools()
	return s, nil
}

// close cancels every delegation in flight and waits for it, then closes
// the tree (killing the background children) and the parent.
func (s *mcpServer) close() {
	s.stop()
	s.calls.Wait()
	s.events.Release()
	s.tree.close()
	s.parent.Close()
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
func (s *mcpServer) event(ev subagent.Event) error {
	var run string
	switch ev := ev.(type) {
	case subagent.RunStarted:
		run = ev.RunID
	case subagent.RunProgress:
		run = ev.RunID
	case subagent.RunEnded:
		run = ev.RunID
	}
	s.mu.Lock()
	w := s.watchers[run]
	s.mu.Unlock()
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

func (s *mcpServer) providers(context.Context, *mcp.CallToolRequest, mcpNoArgs) (*mcp.CallToolResult, any, error) {
	var out []mcpProvider
	for _, name := range s.tree.svc.List() {
		p, ok := s.tree.svc.GetProvider(name)
		if !ok {
			continue
		}
		_, resumes := p.(subagent.Resumer)
		out = append(out, mcpProvider{Name: name, Capabilities: p.Capabilities(), InheritsParentContext: p.InheritsParentContext(), Resumes: resumes})
	}
	return toolJSON(map[string]any{"providers": out})
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
// the server closes); the returned func ends it.
func (s *mcpServer) enter() (func(), error) {
	if s.base.Err() != nil {
		return nil, errors.New("the server is closing")
	}
	if s.running.Add(1) > maxConcurrent {
		s.running.Add(-1)
		return nil, fmt.Errorf("at most %d delegations may run at once", maxConcurrent)
	}
	s.calls.Add(1)
	return func() { s.running.Add(-1); s.calls.Done() }, nil
}

// request checks a delegation's arguments (K3) and makes its request.
func (s *mcpServer) request(a mcpDelegateArgs) (subagent.StartRequest, error) {
	req := subagent.StartRequest{Parent: s.parent, Prompt: []subagent.ContentBlock{subagent.Text(a.Prompt)}}
	switch {
	case a.Prompt == "":
		return req, errors.New("prompt is empty")
	case len(a.Prompt) > maxPromptBytes:
		return req, errPromptTooLarge
	}
	if _, ok := s.tree.svc.GetProvider(a.Provider); !ok {
		return req, fmt.Errorf("no provider %q (configured: %v)", a.Provider, s.tree.svc.List())
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
	req, err := s.request(a)
	if err != nil {
		return nil, nil, err
	}
	done, err := s.enter()
	if err != nil {
		return nil, nil, err
	}
	defer done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	if a.Background {
		c, err := s.tree.svc.StartContinuable(ctx, a.Provider, req)
		if err != nil {
			return nil, nil, err
		}
		return toolJSON(map[string]any{"kind": "background", "taskId": c.Task.ID, "childId": c.ChildID})
	}
	runID := ids.New()
	if token := r.Params.GetProgressToken(); token != nil {
		s.watch(ctx, runID, r.Session, token)
		defer s.unwatch(runID)
	}
	run, err := s.tree.svc.StartAs(ctx, a.Provider, req, runID)
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
	if err := s.events.Flush(context.WithoutCancel(ctx)); err != nil {
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
func (s *mcpServer) watch(ctx context.Context, run string, session *mcp.ServerSession, token any) {
	var n int
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers[run] = func(ev subagent.Event) {
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

func (s *mcpServer) unwatch(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, run)
}

func (s *mcpServer) send(ctx context.Context, _ *mcp.CallToolRequest, a mcpSendArgs) (*mcp.CallToolResult, any, error) {
	switch {
	case a.Message == "":
		return nil, nil, errors.New("message is empty")
	case len(a.Message) > maxPromptBytes:
		return nil, nil, errPromptTooLarge
	}
	d, err := s.tree.svc.SendMessage(ctx, s.parent, a.ChildID, []subagent.ContentBlock{subagent.Text(a.Message)}, "mcp")
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{"route": string(d.Route)}
	if d.Task.ID != "" {
		out["taskId"] = d.Task.ID
	}
	return toolJSON(out)
}

func (s *mcpServer) tasks(ctx context.Context, _ *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, any, error) {
	list, err := s.tree.mgr.List(ctx, s.parent.SessionID())
	if err != nil {
		return nil, nil, err
	}
	out := make([]jsonTask, len(list))
	for i, t := range list {
		out[i] = jsonTaskOf(t)
	}
	return toolJSON(map[string]any{"tasks": out})
}

func (s *mcpServer) taskResult(ctx context.Context, _ *mcp.CallToolRequest, a mcpResultArgs) (*mcp.CallToolResult, any, error) {
	var t tasks.Task
	var err error
	if wait := time.Duration(a.WaitSeconds) * time.Second; wait > 0 {
		t, err = s.tree.mgr.Collect(ctx, s.parent.SessionID(), a.TaskID, min(wait, maxWait))
	} else {
		t, err = s.tree.mgr.Get(ctx, s.parent.SessionID(), a.TaskID)
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

func (s *mcpServer) kill(ctx context.Context, _ *mcp.CallToolRequest, a mcpTaskArgs) (*mcp.CallToolResult, any, error) {
	t, err := s.tree.mgr.Kill(ctx, s.parent.SessionID(), a.TaskID)
	if err != nil {
		return nil, nil, err
	}
	return toolJSON(jsonTaskOf(t))
}
