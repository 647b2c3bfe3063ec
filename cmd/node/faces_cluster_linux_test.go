package main

// Contracts X1, X2 with K1: both faces delegate to an agent server only
// another node of the cluster offers (-cluster -provider, the membership
// from the -config file's "cluster" object).

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
)

// Contracts X1, X2, K1: node B serves the fake agent; node mcp and node
// acp on A, with -cluster -provider fake and A's membership in their
// -config file, delegate to it: the MCP client lists fake among the
// providers and its delegation answers with B's agent's echo; the ACP
// editor's prompt shows the remote child as a tool call that completes.
// B's agent ends with each child.
func TestX1_X2_K1_FacesDelegateToAClusterMember(t *testing.T) {
	a, b := newMember(t), newMember(t)
	nodeB, _ := serve(t, b, static(a, b))
	config, err := json.Marshal(map[string]any{
		"agent_servers": map[string]any{},
		"cluster":       map[string]any{"listen": a.listen, "peers": []string{a.membership, b.membership}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, string(config))
	dir := facesTree(t)

	s, _ := startMCP(t, t.TempDir(), dir, make(chan string, 64), "-config", cfg, "-cluster", "-provider", "fake")
	if got := textOf(call(t, s, "providers", nil)); !strings.Contains(got, `"name":"fake"`) {
		t.Fatalf("providers: %s", got)
	}
	if r := call(t, s, "delegate", map[string]any{"provider": "fake", "prompt": "remote one"}); r.IsError || !strings.Contains(textOf(r), "echo: remote one") {
		t.Fatalf("delegate to the member's fake: %v %q", r.IsError, textOf(r))
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent to end with the MCP child")
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	srv := openaitest.NewServer(t,
		openaitest.Calls(openaitest.ToolCall{ID: "call_1", Name: "fake", Args: `{"description": "ask fake", "prompt": "remote two"}`}),
		openaitest.Reply("The remote agent answered."))
	c := startACP(t, t.TempDir(), dir, modelEnv(srv), "-config", cfg, "-cluster", "-provider", "fake")
	ctx := testkit.Ctx(t)
	sess, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: prompt("ask the cluster")})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %v, %q", err, res.StopReason)
	}
	got := c.seen(sess.SessionId)
	completed := false
	for id, title := range got.titles {
		if strings.HasPrefix(title, "fake") && got.status[id] == sdk.ToolCallStatusCompleted {
			completed = true
		}
	}
	if !completed || !strings.Contains(got.text, "The remote agent answered.") {
		t.Fatalf("tool calls %v %v, text %q: want the remote child completed", got.titles, got.status, got.text)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent to end with the ACP child")
}
