package main

// Contracts X1 and K3: what an ACP client sends node acp is bounded: one
// prompt at a time per session, a frame's size, the sessions of one
// connection and the rate of requests.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/acptest"
	"github.com/subactor/subactor/internal/testkit/openaitest"
)

// Contract X1 and K3: a second prompt to a session whose prompt runs is
// refused with an error naming the running one, and the running one goes
// on to its end (the SDK alone would have cancelled it); a frame over the
// bound is dropped with an error, not the connection; the session then
// takes prompts again.
func TestX1_K3_OnePromptPerSessionAndFrameSize(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	c := startACP(t, data, dir, modelEnv(surveyWithExample(t)), "-config", exampleConfig(t))
	ctx := testkit.Ctx(t)
	s, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res sdk.PromptResponse
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("survey .")})
		first <- answer{res, err}
	}()
	c.waitFor(t, s.SessionId, "the example child to run", exampleRunning)
	_, err = c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("echo second")})
	if err == nil || !strings.Contains(err.Error(), "has a prompt running") {
		t.Fatalf("a second prompt while one runs: %v, want a refusal naming the running prompt", err)
	}
	if a := testkit.Recv(t, first, "the first prompt's answer"); a.err != nil || a.res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the first prompt ended %q (%v), want end_turn: the second one must not cancel it", a.res.StopReason, a.err)
	}

	// A frame over the bound, written whole while nothing else is sent.
	huge := fmt.Sprintf(`{"jsonrpc":"2.0","id":"huge","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"%s"}]}}`+"\n", s.SessionId, strings.Repeat("x", maxACPFrame))
	if _, err := c.stdin.Write([]byte(huge)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node to say it dropped the frame", func() bool {
		return strings.Contains(c.stderr.String(), "dropped a frame of the client over the limit")
	})
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("echo again")})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("a prompt after the dropped frame: %v, %q", err, res.StopReason)
	}
}

// Contract X1 and K3: one connection holds at most maxSessions sessions,
// and a client's requests past the rate are refused with an error saying
// so, the connection kept.
func TestX1_K3_SessionsAndRequestRateAreBounded(t *testing.T) {
	dir := facesTree(t)
	c := startACP(t, t.TempDir(), dir, nil)
	ctx := testkit.Ctx(t)
	for i := range maxSessions {
		if _, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}}); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	_, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d sessions", maxSessions)) {
		t.Fatalf("session %d: %v, want a refusal naming the bound", maxSessions+1, err)
	}

	// Far more requests at once than the burst.
	atOnce(t, 4*requestBurst, "requests a second", func() error {
		_, err := c.conn.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: "none"})
		return err
	})
}

// Contract X1: what the ACP children of a session ask of their client
// goes to the editor: the example agent's permission request, on a tool
// call named by the child's run id (the editor allows it, and the child
// goes on as allowed), and the fake agent's file requests (its server
// allows files): a read served from the editor's unsaved buffer, a write
// kept by the editor and not written to disk, a path outside the
// session's cwd refused before the editor is asked.
func TestX1_ChildrensPermissionAndFileRequestsGoToTheEditor(t *testing.T) {
	dir, data := facesTree(t), t.TempDir()
	file := filepath.Join(dir, "a", "one.txt")
	srv := openaitest.NewResponder(t, func(r openaitest.Request) openaitest.Step {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return openaitest.Reply("done")
			}
		}
		return openaitest.Step{ToolCalls: []openaitest.ToolCall{
			{ID: "call-example", Name: "example", Args: `{"description":"demo","prompt":"improve the project"}`},
			{ID: "call-fake", Name: "fake", Args: fmt.Sprintf(`{"description":"files","prompt":%q}`, "files "+file)},
		}}
	})
	var fake map[string]any
	if err := json.Unmarshal([]byte(fakeServer(t)), &fake); err != nil {
		t.Fatal(err)
	}
	fake["read_files"], fake["write_files"] = true, true
	config, err := json.Marshal(map[string]any{"agent_servers": map[string]any{"example": map[string]any{"command": acptest.ExampleAgent(t)}, "fake": fake}})
	if err != nil {
		t.Fatal(err)
	}
	c := startACP(t, data, dir, modelEnv(srv), "-config", writeConfig(t, string(config)))
	c.mu.Lock()
	c.buffers[file] = "unsaved buffer"
	c.mu.Unlock()
	ctx := testkit.Ctx(t)
	s, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("do it")})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %v, %q", err, res.StopReason)
	}
	got := c.seen(s.SessionId)
	var exampleRun sdk.ToolCallId
	for id, title := range got.titles {
		if strings.HasPrefix(title, "example: ") && !strings.Contains(string(id), "/") { // not the permission's own
			exampleRun = id
		}
	}
	shown := c.shown(t, s.SessionId)
	c.mu.Lock()
	defer c.mu.Unlock()
	if exampleRun == "" || len(c.perms) != 1 {
		t.Fatalf("example child %q, permission requests %+v: want one, on the child", exampleRun, c.perms)
	}
	p := c.perms[0]
	if !strings.HasPrefix(string(p.ToolCall.ToolCallId), string(exampleRun)+"/") || p.ToolCall.Title == nil || !strings.Contains(*p.ToolCall.Title, "Modifying critical configuration file") {
		t.Fatalf("permission request on %q titled %v, want a tool call of the example child %s", p.ToolCall.ToolCallId, p.ToolCall.Title, exampleRun)
	}
	if !strings.Contains(shown, "successfully updated the configuration") {
		t.Errorf("the example child did not go on as allowed:\n%s", shown)
	}
	for _, want := range []string{`read \"unsaved buffer\"; written; outside refused`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the fake child's answer has no %s:\n%s", want, shown)
		}
	}
	if c.buffers[file+".out"] != "copied" {
		t.Errorf("the write did not reach the editor: buffers %v", c.buffers)
	}
	if _, err := os.Stat(file + ".out"); !os.IsNotExist(err) {
		t.Errorf("a relayed write reached the disk: %v", err)
	}
	if len(c.reads) != 1 || c.reads[0] != file {
		t.Errorf("the editor was asked to read %v, want %s alone", c.reads, file)
	}
}

// atOnce makes n calls at once and fails unless some were refused with an
// error saying refusal, and none failed otherwise (a rate bound, K3).
func atOnce(t *testing.T, n int, refusal string, call func() error) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
		other   []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
			case strings.Contains(err.Error(), refusal):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if refused == 0 || len(other) > 0 {
		t.Fatalf("%d calls at once: %d refused (%q), other errors %v", n, refused, refusal, other)
	}
}
