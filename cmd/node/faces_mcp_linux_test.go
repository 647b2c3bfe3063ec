package main

// Contract X2 over streamable HTTP (node mcp -listen), its bounds (K3),
// and a real third-party client: @modelcontextprotocol/inspector-cli.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/scripted"
)

// mcpHTTP is a node mcp -listen subprocess.
type mcpHTTP struct {
	url    string
	stderr *testkit.Buffer
	exited chan struct{}
	err    error
	cmd    *exec.Cmd
}

// startMCPHTTP starts node mcp -listen 127.0.0.1:0 on the data directory
// data, in dir, and waits for the address it says it listens on.
func startMCPHTTP(t *testing.T, data, dir string, args ...string) *mcpHTTP {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "-data", data, "-listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &mcpHTTP{stderr: &testkit.Buffer{}, exited: make(chan struct{}), cmd: cmd}
	listening := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(n.stderr, line)
			if _, url, ok := strings.Cut(line, "listening on "); ok {
				listening <- url
			}
		}
	}()
	go func() { <-copied; n.err = cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-n.exited
		if t.Failed() {
			t.Logf("node mcp stderr:\n%s", n.stderr)
		}
	})
	n.url = testkit.Recv(t, listening, "node mcp to listen")
	return n
}

// connectHTTP connects the MCP Go SDK's client to url; progress
// notifications go to progress (when not nil).
func connectHTTP(t *testing.T, url string, progress chan<- string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "x2-http-test", Version: "v1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if progress == nil {
				return
			}
			select {
			case progress <- r.Params.Message:
			default:
			}
		},
	})
	s, err := client.Connect(testkit.Ctx(t), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// Contract X2 over streamable HTTP: a client lists the tools and
// delegates without a schema and with one (structured, with progress);
// kill stops its background child (its agent ends); each client has its
// own children (another lists none of the first one's tasks); a client
// that leaves mid-delegation leaves nothing running; the node exits 0 on
// SIGTERM.
func TestX2_StreamableHTTPDelegatesKillsAndKeepsClientsApart(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	n := startMCPHTTP(t, data, dir, "-config", exampleConfig(t))
	progress := make(chan string, 256)
	a, err := connectHTTP(t, n.url, progress)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ctx := testkit.Ctx(t)
	tools, err := a.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 6 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	if r := call(t, a, "delegate", map[string]any{"provider": "spawn", "prompt": "echo hello"}); r.IsError || textOf(r) != "hello" {
		t.Fatalf("delegate: %v %q", r.IsError, textOf(r))
	}
	var schema map[string]any
	if err := json.Unmarshal(scripted.TallySchema, &schema); err != nil {
		t.Fatal(err)
	}
	res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"provider": "spawn", "prompt": "tally a", "output_schema": schema}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || res.IsError {
		t.Fatalf("delegate with a schema: %v %v", err, res)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	var tally struct{ Files, Folders int }
	if err := json.Unmarshal(structured, &tally); err != nil || tally.Files != 1 {
		t.Fatalf("structured result %s (%v)", structured, err)
	}
	if msg := testkit.Recv(t, progress, "a progress notification"); !strings.HasPrefix(msg, "started spawn") {
		t.Fatalf("first progress %q", msg)
	}

	// kill stops a background child and its agent.
	var bg struct{ TaskID string }
	if err := json.Unmarshal([]byte(textOf(call(t, a, "delegate", map[string]any{"provider": "example", "prompt": "improve the project", "background": true}))), &bg); err != nil || bg.TaskID == "" {
		t.Fatalf("background delegate: %+v %v", bg, err)
	}
	eventually(t, "the background agent to run", func() bool { return len(records(t, data)) > 0 })
	if got := textOf(call(t, a, "kill", map[string]any{"task_id": bg.TaskID})); !strings.Contains(got, `"id":"`+bg.TaskID) {
		t.Fatalf("kill: %s", got)
	}
	if got := textOf(call(t, a, "task_result", map[string]any{"task_id": bg.TaskID, "wait_seconds": 60})); !strings.Contains(got, `"state":"killed"`) {
		t.Fatalf("task_result after kill: %s", got)
	}
	eventually(t, "the killed child's agent to end", func() bool { return len(records(t, data)) == 0 })

	// Another client has children of its own.
	b, err := connectHTTP(t, n.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(call(t, b, "tasks", nil)); strings.Contains(got, bg.TaskID) || !strings.Contains(got, `"tasks":null`) && !strings.Contains(got, `"tasks":[]`) {
		t.Fatalf("the second client sees tasks %s", got)
	}

	// The first client leaves mid-delegation.
	go func() {
		_, _ = a.CallTool(context.WithoutCancel(ctx), &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"provider": "example", "prompt": "improve the project"}, Meta: mcp.Meta{"progressToken": "p2"}})
	}()
	for msg := ""; !strings.HasPrefix(msg, "started example"); {
		msg = testkit.Recv(t, progress, "the example child to start")
	}
	if err := a.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	eventually(t, "the left client's child's agent to end", func() bool { return len(records(t, data)) == 0 })
	if r := call(t, b, "delegate", map[string]any{"provider": "spawn", "prompt": "echo still here"}); textOf(r) != "still here" {
		t.Fatalf("the second client after the first left: %q", textOf(r))
	}

	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	testkit.Recv(t, n.exited, "node mcp to exit on SIGTERM")
	if n.err != nil {
		t.Fatalf("node mcp: %v", n.err)
	}
}

// Contract X2 and K3: -listen beyond loopback without TLS is refused (as
// a cluster member's), and so are TLS flags without -listen; a request
// body over the frame bound is refused (413), and so is a browser's
// cross-origin post (403); at most maxClients MCP
// sessions are open at once; a session's tool calls past the rate are
// refused with an error saying so.
func TestX2_K3_HTTPListenAndBounds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-listen", "0.0.0.0:0"}, "beyond loopback needs TLS"},
		{[]string{"-listen", ":0"}, "name the host"},
		{[]string{"-tls-cert", "c.pem", "-tls-key", "k.pem"}, "give -listen too"},
		{[]string{"-listen", "127.0.0.1:0", "-tls-cert", "c.pem"}, "-tls-cert and -tls-key together"},
		{[]string{"-provider", "fake"}, "give -cluster too"},
		{[]string{"-cluster", "-provider", "fake"}, `"cluster" object of -config FILE`},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, append([]string{"mcp", "-data", memoryData}, c.args...)...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("mcp %v: %v, stderr %q; want exit %d saying %q", c.args, err, stderr.String(), exitUsage, c.want)
		}
	}

	n := startMCPHTTP(t, t.TempDir(), facesTree(t))
	ctx := testkit.Ctx(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", maxFrame) + `"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over %d bytes: %s, want 413", maxFrame, resp.Status)
	}

	// A browser page's cross-origin post is refused.
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, n.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-origin post: %s, want 403", resp.Status)
	}

	var sessions []*mcp.ClientSession
	for i := range maxClients {
		s, err := connectHTTP(t, n.url, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
		sessions = append(sessions, s)
	}
	if _, err := connectHTTP(t, n.url, nil); err == nil || !strings.Contains(err.Error(), "Service Unavailable") && !strings.Contains(err.Error(), fmt.Sprint(maxClients)) {
		t.Fatalf("session %d: %v, want a refusal", maxClients+1, err)
	}

	// Far more tool calls at once than the burst, on one session.
	atOnce(t, 4*callBurst, "tool calls a second", func() error {
		_, err := sessions[0].CallTool(ctx, &mcp.CallToolParams{Name: "providers", Arguments: map[string]any{}})
		return err
	})
	// Closing a session makes room for another.
	if err := sessions[1].Close(); err != nil {
		t.Logf("close: %v", err)
	}
	eventually(t, "a closed session to make room", func() bool {
		s, err := connectHTTP(t, n.url, nil)
		if err == nil {
			_ = s.Close()
		}
		return err == nil
	})
}

// inspectorCLI is @modelcontextprotocol/inspector-cli's command, and a
// working directory it runs from. Version 1.0.3 reads its own
// package.json by a path it checks relative to its working directory
// ("../package.json") but imports relative to its module: from a
// directory whose parent holds a package.json, both name the same file.
// It fails the test when CI=true and it is missing, skips otherwise.
func inspectorCLI(t *testing.T) (cli, dir string) {
	t.Helper()
	cli, err := exec.LookPath("mcp-inspector-cli")
	if err != nil {
		const install = "@modelcontextprotocol/inspector-cli is not installed (npm install -g @modelcontextprotocol/inspector-cli@1.0.3)"
		if os.Getenv("CI") == "true" {
			t.Fatal(install)
		}
		t.Skip(install)
	}
	root := facesTree(t)
	if err := os.WriteFile(filepath.Join(root, "package.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cli, filepath.Join(root, "a")
}

// inspect runs the inspector's CLI mode on target (a command or a URL)
// and decodes the result it prints.
func inspect(t *testing.T, cli, dir string, target []string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.CommandContext(testkit.Ctx(t), cli, append(append([]string{"--cli"}, target...), args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %v: %v\n%s%s", args, err, out, stderr.Bytes())
	}
	var v map[string]any
	if err := json.Unmarshal(out[bytes.IndexByte(out, '{'):], &v); err != nil {
		t.Fatalf("inspector %v printed %s: %v", args, out, err)
	}
	return v
}

// Contract X2 with a real third-party client: the MCP inspector's CLI
// lists node mcp's tools and calls delegate without a schema (text) and
// with one (structured content), over stdio and over streamable HTTP.
func TestX2_InspectorCLIListsToolsAndDelegatesOverStdioAndHTTP(t *testing.T) {
	cli, dir := inspectorCLI(t)
	data := t.TempDir()
	n := startMCPHTTP(t, t.TempDir(), dir)
	for _, target := range [][]string{
		{bin, "mcp", "-data", data},
		{n.url, "--transport", "http"},
	} {
		listed := inspect(t, cli, dir, target, "--method", "tools/list")
		var names []string
		for _, tl := range listed["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		if got := strings.Join(names, ","); got != "delegate,kill,providers,send,task_result,tasks" {
			t.Fatalf("%v: tools %s", target, got)
		}
		plain := inspect(t, cli, dir, target, "--method", "tools/call", "--tool-name", "delegate", "--tool-arg", "provider=spawn", "--tool-arg", "prompt=echo hello")
		if content, _ := json.Marshal(plain["content"]); plain["isError"] == true || !strings.Contains(string(content), `"text":"hello"`) {
			t.Fatalf("%v: delegate: %v", target, plain)
		}
		structured := inspect(t, cli, dir, target, "--method", "tools/call", "--tool-name", "delegate", "--tool-arg", "provider=spawn", "--tool-arg", "prompt=tally .", "--tool-arg", "output_schema="+string(scripted.TallySchema))
		sc, _ := structured["structuredContent"].(map[string]any)
		if structured["isError"] == true || sc == nil || sc["files"] != float64(1) {
			t.Fatalf("%v: delegate with a schema: %v", target, structured)
		}
	}
}

// Contract X2 and K3: at most maxConcurrent delegations of one MCP
// session run at once: with that many children waiting on their model,
// one more is refused with an error naming the bound, and the waiting
// ones answer once their model does.
func TestX2_K3_ConcurrentDelegationsAreBounded(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{}, 2*maxConcurrent)
	srv := openaitest.NewResponder(t, func(openaitest.Request) openaitest.Step {
		asked <- struct{}{}
		<-release
		return openaitest.Reply("released")
	})
	for _, kv := range modelEnv(srv) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s, _ := startMCP(t, t.TempDir(), facesTree(t), make(chan string, 1))
	ctx := testkit.Ctx(t)
	answers := make(chan string, maxConcurrent)
	for range maxConcurrent {
		go func() {
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"provider": "spawn", "prompt": "wait for the model"}})
			if err != nil {
				answers <- err.Error()
				return
			}
			answers <- textOf(r)
		}()
	}
	for i := range maxConcurrent {
		testkit.Recv(t, asked, fmt.Sprintf("child %d to ask its model", i+1))
	}
	r := call(t, s, "delegate", map[string]any{"provider": "spawn", "prompt": "one more"})
	if !r.IsError || !strings.Contains(textOf(r), fmt.Sprintf("at most %d delegations", maxConcurrent)) {
		t.Fatalf("a delegation past the bound: %v %q", r.IsError, textOf(r))
	}
	close(release)
	for i := range maxConcurrent {
		if got := testkit.Recv(t, answers, fmt.Sprintf("delegation %d's answer", i+1)); got != "released" {
			t.Fatalf("delegation %d answered %q", i+1, got)
		}
	}
}
