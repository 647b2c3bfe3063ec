package main

// Contracts X1 (node acp) and X2 (node mcp), with real partners: the ACP
// Go SDK's client side (and acpx) driving a node acp subprocess, the MCP
// Go SDK's client driving a node mcp subprocess. Children run on the
// scripted model (spawn) and on the ACP Go SDK's example agent.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/scripted"
)

// facesTree is a project with two sub-folders: a survey delegates one
// spawn child to each.
func facesTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"a/one.txt", "b/two.txt"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// exampleConfig is a -config file naming the ACP Go SDK's example agent
// "example".
func exampleConfig(t *testing.T) string {
	return writeConfig(t, fmt.Sprintf(`{"agent_servers": {"example": {"command": %q}}}`, acptest.ExampleAgent(t)))
}

// surveyWithExample answers as the scripted model does, and where it
// delegates the survey's sub-folders it also delegates to the example
// agent: two spawn children and one ACP child in one turn.
func surveyWithExample(t *testing.T) *openaitest.Server {
	scriptedStep := scriptedResponder(t)
	return openaitest.NewResponder(t, func(r openaitest.Request) openaitest.Step {
		step := scriptedStep(r)
		for _, c := range step.ToolCalls {
			if c.Name == "subagent" {
				step.ToolCalls = append(step.ToolCalls, openaitest.ToolCall{ID: "call-example", Name: "example", Args: `{"description":"demo","prompt":"improve the project"}`})
				break
			}
		}
		return step
	})
}

// modelEnv points a node at srv.
func modelEnv(srv *openaitest.Server) []string {
	return []string{envBaseURL + "=" + srv.URL, envAPIKey + "=sk-faces", envModel + "=" + openaitest.DefaultModel}
}

// acpClient is the ACP Go SDK's client side on a node acp subprocess; it
// keeps every session update.
type acpClient struct {
	acptestClient
	conn   *sdk.ClientSideConnection
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testkit.Buffer
	// exited is closed once the node exited, with err its exit error.
	exited chan struct{}
	err    error

	mu      sync.Mutex
	updates map[sdk.SessionId][]sdk.SessionUpdate
	notify  chan struct{}
	// As an editor: the permission requests it was asked (it allows
	// each), its unsaved buffers by path (served before the disk) and
	// the files written through it (kept as buffers, not on disk).
	perms   []sdk.RequestPermissionRequest
	buffers map[string]string
	reads   []string
}

// RequestPermission implements sdk.Client: it allows once.
func (c *acpClient) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.perms = append(c.perms, p)
	c.mu.Unlock()
	for _, o := range p.Options {
		if o.Kind == sdk.PermissionOptionKindAllowOnce {
			return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// ReadTextFile implements sdk.Client: a buffer, else the disk.
func (c *acpClient) ReadTextFile(_ context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	c.mu.Lock()
	c.reads = append(c.reads, p.Path)
	text, ok := c.buffers[p.Path]
	c.mu.Unlock()
	if !ok {
		b, err := os.ReadFile(p.Path)
		if err != nil {
			return sdk.ReadTextFileResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error()})
		}
		text = string(b)
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

// WriteTextFile implements sdk.Client: into a buffer.
func (c *acpClient) WriteTextFile(_ context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buffers[p.Path] = p.Content
	return sdk.WriteTextFileResponse{}, nil
}

// shown is the JSON of every update of session id.
func (c *acpClient) shown(t *testing.T, id sdk.SessionId) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(c.updates[id])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// acptestClient answers what the node never asks of these tests (the
// permission and file requests are acpClient's own).
type acptestClient struct{}

func (acptestClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}
func (acptestClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}
func (acptestClient) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}
func (acptestClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}
func (acptestClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, nil
}
func (acptestClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, nil
}
func (acptestClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, nil
}
func (acptestClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, nil
}
func (acptestClient) UnstableCompleteElicitation(context.Context, sdk.UnstableCompleteElicitationNotification) error {
	return nil
}
func (acptestClient) UnstableCreateElicitation(context.Context, sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
	return sdk.UnstableCreateElicitationResponse{}, nil
}

// SessionUpdate implements sdk.Client.
func (c *acpClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	c.updates[n.SessionId] = append(c.updates[n.SessionId], n.Update)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// startACP starts node acp on the data directory data, in dir, with env
// added, and connects the SDK's client to it.
func startACP(t *testing.T, data, dir string, env []string, args ...string) *acpClient {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"acp", "-data", data}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	c := &acpClient{cmd: cmd, stderr: &testkit.Buffer{}, exited: make(chan struct{}), updates: map[sdk.SessionId][]sdk.SessionUpdate{}, notify: make(chan struct{}, 1), buffers: map[string]string{}}
	cmd.Stderr = c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("node acp stderr:\n%s", c.stderr)
		}
	})
	c.conn = sdk.NewClientSideConnection(c, stdin, stdout)
	init, err := c.conn.Initialize(testkit.Ctx(t), sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if !init.AgentCapabilities.LoadSession {
		t.Fatal("initialize: loadSession is not advertised")
	}
	return c
}

// waitExit waits for the node to exit 0.
func (c *acpClient) waitExit(t *testing.T, what string) {
	t.Helper()
	testkit.Recv(t, c.exited, what)
	if c.err != nil {
		t.Fatalf("node acp: %v", c.err)
	}
}

// seen is what the client saw of session id: the tool calls of its
// children by id (their title and last status) and its text.
type seen struct {
	titles map[sdk.ToolCallId]string
	status map[sdk.ToolCallId]sdk.ToolCallStatus
	text   string // agent message chunks
	user   string // user message chunks
}

func (c *acpClient) seen(id sdk.SessionId) seen {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := seen{titles: map[sdk.ToolCallId]string{}, status: map[sdk.ToolCallId]sdk.ToolCallStatus{}}
	for _, u := range c.updates[id] {
		switch {
		case u.ToolCall != nil:
			s.titles[u.ToolCall.ToolCallId], s.status[u.ToolCall.ToolCallId] = u.ToolCall.Title, u.ToolCall.Status
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			s.status[u.ToolCallUpdate.ToolCallId] = *u.ToolCallUpdate.Status
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			s.text += u.AgentMessageChunk.Content.Text.Text
		case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
			s.user += u.UserMessageChunk.Content.Text.Text
		}
	}
	return s
}

// waitFor waits until the updates of session id satisfy cond.
func (c *acpClient) waitFor(t *testing.T, id sdk.SessionId, what string, cond func(seen) bool) {
	t.Helper()
	for !cond(c.seen(id)) {
		testkit.Recv(t, c.notify, what)
	}
}

// exampleRunning reports whether a child on the example agent is shown
// running.
func exampleRunning(s seen) bool {
	for id, title := range s.titles {
		if strings.HasPrefix(title, "example") && s.status[id] == sdk.ToolCallStatusInProgress {
			return true
		}
	}
	return false
}

func prompt(text string) []sdk.ContentBlock { return []sdk.ContentBlock{sdk.TextBlock(text)} }

// Contract X1: an editor's prompt runs a top agent that delegates to two
// spawn children and one ACP child (the example agent), each shown as a
// tool call that ends completed; a second prompt cancelled mid-turn ends
// cancelled with every child ended and no agent left running; a fresh
// node process loads the first session (its history replayed) and
// continues it.
func TestX1_ACPPromptDelegatesCancelsAndLoadsInAFreshProcess(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	config := exampleConfig(t)
	env := modelEnv(surveyWithExample(t))
	c := startACP(t, data, dir, env, "-config", config)
	ctx := testkit.Ctx(t)

	s1, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s1.SessionId, Prompt: prompt("survey .")})
	if err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	if res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q, want end_turn", res.StopReason)
	}
	got := c.seen(s1.SessionId)
	want := map[string]bool{"spawn: tally a": false, "spawn: tally b": false, "example: improve the project": false}
	for id, title := range got.titles {
		if _, ok := want[title]; ok {
			want[title] = true
			if got.status[id] != sdk.ToolCallStatusCompleted {
				t.Errorf("child %q ended %q, want completed", title, got.status[id])
			}
		}
	}
	for title, shown := range want {
		if !shown {
			t.Errorf("no tool call %q among %v", title, got.titles)
		}
	}
	if !strings.Contains(got.text, "2 files") {
		t.Errorf("the answer %q does not total the two files", got.text)
	}

	// A second prompt, cancelled while the example agent works.
	s2, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	answered := make(chan sdk.PromptResponse, 1)
	go func() {
		res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s2.SessionId, Prompt: prompt("survey .")})
		if err != nil {
			t.Errorf("second session/prompt: %v", err)
		}
		answered <- res
	}()
	c.waitFor(t, s2.SessionId, "the example child to run", exampleRunning)
	if err := c.conn.Cancel(ctx, sdk.CancelNotification{SessionId: s2.SessionId}); err != nil {
		t.Fatal(err)
	}
	if res := testkit.Recv(t, answered, "the cancelled prompt's answer"); res.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("cancelled prompt: stop reason %q, want cancelled", res.StopReason)
	}
	got = c.seen(s2.SessionId)
	for id, title := range got.titles {
		if st := got.status[id]; st != sdk.ToolCallStatusCompleted && st != sdk.ToolCallStatusFailed {
			t.Errorf("child %q still %q after the cancel", title, st)
		}
	}
	eventually(t, "no agent recorded running", func() bool { return len(records(t, data)) == 0 })

	// The client goes; the node ends.
	_ = c.stdin.Close()
	c.waitExit(t, "node acp to exit")

	// A fresh process loads the first session and continues it.
	c2 := startACP(t, data, dir, env, "-config", config)
	if _, err := c2.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: s1.SessionId, Cwd: dir, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	replayed := c2.seen(s1.SessionId)
	if !strings.Contains(replayed.user, "survey .") || !strings.Contains(replayed.text, "2 files") {
		t.Fatalf("session/load replayed user %q and agent %q, want the first prompt and answer", replayed.user, replayed.text)
	}
	res, err = c2.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s1.SessionId, Prompt: prompt("and again")})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt after load: %v, stop reason %q", err, res.StopReason)
	}
	if after := c2.seen(s1.SessionId); !strings.Contains(after.text, "noted") {
		t.Fatalf("the continued session answered %q, without noting the new prompt", after.text)
	}
}

// Contract X1 (and R3): a client that disconnects mid-turn leaves nothing
// running: the node ends its turn, its children and their agents, and
// exits.
func TestX1_ClientDisconnectingMidTurnLeavesNothingRunning(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	c := startACP(t, data, dir, modelEnv(surveyWithExample(t)), "-config", exampleConfig(t))
	ctx := testkit.Ctx(t)
	s, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("survey .")})
	}()
	c.waitFor(t, s.SessionId, "the example child to run", exampleRunning)
	if len(records(t, data)) == 0 {
		t.Fatal("the example agent is not recorded running")
	}
	_ = c.stdin.Close()
	c.waitExit(t, "node acp to exit after its client left")
	if recs := records(t, data); len(recs) != 0 {
		t.Fatalf("agents still recorded after the node exited: %v", recs)
	}
}

// Contract X1 and K3: what a client sends is checked: a relative cwd, an
// unknown session, an empty prompt and a prompt over the bound are
// refused with an error, and the session still works.
func TestX1_K3_BadRequestsAreRefused(t *testing.T) {
	dir := facesTree(t)
	c := startACP(t, t.TempDir(), dir, nil)
	ctx := testkit.Ctx(t)
	if _, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: "relative", McpServers: []sdk.McpServer{}}); err == nil {
		t.Fatal("a relative cwd was taken")
	}
	if _, err := c.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "nope", Cwd: dir, McpServers: []sdk.McpServer{}}); err == nil {
		t.Fatal("an unknown session was loaded")
	}
	s, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt(strings.Repeat("x", maxPromptBytes+1))}); err == nil {
		t.Fatal("a prompt over the bound was taken")
	}
	if _, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: "other", Prompt: prompt("echo hi")}); err == nil {
		t.Fatal("a prompt to no session was taken")
	}
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("echo hi")})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %v, %q", err, res.StopReason)
	}
	if got := c.seen(s.SessionId).text; got != "hi" {
		t.Fatalf("answer %q, want hi", got)
	}
}

// Contract X1 with a real third-party client: acpx runs a prompt through
// node acp that delegates to two spawn children, and shows them.
func TestX1_AcpxRunsAPromptThroughNodeACP(t *testing.T) {
	acpx := acpxBin(t)
	dir := facesTree(t)
	cmd := exec.CommandContext(testkit.Ctx(t), acpx, "--agent", bin+" acp -data "+t.TempDir(), "--cwd", dir, "--format", "json", "--approve-reads", "exec", "survey .")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("acpx: %v\n%s", err, out)
	}
	for _, want := range []string{`"title":"spawn: tally a"`, `"title":"spawn: tally b"`, `"stopReason":"end_turn"`, `2 files`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("acpx's output has no %s:\n%s", want, out)
		}
	}
}

// startMCP starts node mcp on the data directory data, in dir, and
// connects the MCP Go SDK's client to it; progress notifications go to
// progress.
func startMCP(t *testing.T, data, dir string, progress chan<- string, args ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "-data", data}, args...)...)
	cmd.Dir = dir
	stderr := &testkit.Buffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "x2-test", Version: "v1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Message:
			default:
			}
		},
	})
	session, err := client.Connect(testkit.Ctx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = session.Close()
		if t.Failed() {
			t.Logf("node mcp stderr:\n%s", stderr)
		}
	})
	return session, cmd
}

// call calls tool with args and returns its result, failing on a protocol
// error.
func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(testkit.Ctx(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// Contract X2: the MCP Go SDK's client lists node mcp's tools and
// providers, delegates without a schema (text) and with one (structured,
// with progress notifications), runs a background child, follows it up
// and reads its tasks; an unconfigured provider is refused (K3).
func TestX2_MCPClientDelegatesWithAndWithoutASchemaAndInTheBackground(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	progress := make(chan string, 256)
	s, _ := startMCP(t, data, dir, progress)
	ctx := testkit.Ctx(t)
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "delegate") || len(names) != 6 {
		t.Fatalf("tools %s", got)
	}
	if got := textOf(call(t, s, "providers", nil)); !strings.Contains(got, `"name":"spawn"`) {
		t.Fatalf("providers: %s", got)
	}
	if r := call(t, s, "delegate", map[string]any{"provider": "spawn", "prompt": "echo hello"}); r.IsError || textOf(r) != "hello" {
		t.Fatalf("delegate: %v %q", r.IsError, textOf(r))
	}
	var schema map[string]any
	if err := json.Unmarshal(scripted.TallySchema, &schema); err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"provider": "spawn", "prompt": "tally a", "output_schema": schema}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || res.IsError {
		t.Fatalf("delegate with a schema: %v %s", err, textOf(res))
	}
	structured, _ := json.Marshal(res.StructuredContent)
	var tally struct{ Files, Folders int }
	if err := json.Unmarshal(structured, &tally); err != nil || tally.Files != 1 || tally.Folders != 1 {
		t.Fatalf("structured result %s (%v)", structured, err)
	}
	if msg := testkit.Recv(t, progress, "a progress notification"); !strings.HasPrefix(msg, "started spawn") {
		t.Fatalf("first progress %q", msg)
	}
	if r := call(t, s, "delegate", map[string]any{"provider": "nope", "prompt": "echo x"}); !r.IsError {
		t.Fatalf("an unconfigured provider was taken: %s", textOf(r))
	}

	// In the background, then a follow-up.
	var bg struct{ TaskID, ChildID string }
	if err := json.Unmarshal([]byte(textOf(call(t, s, "delegate", map[string]any{"provider": "spawn", "prompt": "echo later", "background": true}))), &bg); err != nil || bg.TaskID == "" {
		t.Fatalf("background delegate: %+v %v", bg, err)
	}
	if got := textOf(call(t, s, "task_result", map[string]any{"task_id": bg.TaskID, "wait_seconds": 60})); !strings.Contains(got, `"state":"completed"`) || !strings.Contains(got, `"output":"later"`) {
		t.Fatalf("task_result: %s", got)
	}
	var sent struct{ Route, TaskID string }
	if err := json.Unmarshal([]byte(textOf(call(t, s, "send", map[string]any{"child_id": bg.ChildID, "message": "more"}))), &sent); err != nil || sent.Route != "started" {
		t.Fatalf("send: %+v %v", sent, err)
	}
	if got := textOf(call(t, s, "task_result", map[string]any{"task_id": sent.TaskID, "wait_seconds": 60})); !strings.Contains(got, `"state":"completed"`) {
		t.Fatalf("follow-up's task_result: %s", got)
	}
	if got := textOf(call(t, s, "tasks", nil)); strings.Count(got, `"id"`) != 2 {
		t.Fatalf("tasks: %s", got)
	}
}

// Contract X2: notifications/cancelled cancels a delegation (the example
// agent's child ends, its agent with it) and the server goes on; a client
// that disconnects with a background child running leaves nothing
// running.
func TestX2_CancelledDelegationAndDisconnectLeaveNothingRunning(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	progress := make(chan string, 256)
	s, cmd := startMCP(t, data, dir, progress, "-config", exampleConfig(t))
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	failed := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"provider": "example", "prompt": "improve the project"}, Meta: mcp.Meta{"progressToken": "p1"}})
		failed <- err
	}()
	for msg := ""; !strings.HasPrefix(msg, "started example"); {
		msg = testkit.Recv(t, progress, "the example child to start")
	}
	cancel()
	if err := testkit.Recv(t, failed, "the cancelled call"); err == nil {
		t.Fatal("the cancelled call answered")
	}
	eventually(t, "the cancelled child's agent to end", func() bool { return len(records(t, data)) == 0 })
	if r := call(t, s, "delegate", map[string]any{"provider": "spawn", "prompt": "echo still here"}); textOf(r) != "still here" {
		t.Fatalf("after the cancel: %q", textOf(r))
	}

	// A background child, then the client goes.
	call(t, s, "delegate", map[string]any{"provider": "example", "prompt": "improve the project", "background": true})
	eventually(t, "the background agent to run", func() bool { return len(records(t, data)) > 0 })
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil {
		t.Fatal("node mcp did not exit when its client closed")
	}
	if recs := records(t, data); len(recs) != 0 {
		t.Fatalf("agents still recorded after node mcp exited: %v", recs)
	}
}
