package main

// Contracts X1 and K3: what an ACP client sends node acp is bounded: one
// prompt at a time per session, a frame's size, the sessions of one
// connection and the rate of requests.

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit"
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
	const n = 4 * requestBurst
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
			_, err := c.conn.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: "none"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
			case strings.Contains(err.Error(), "requests a second"):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if refused == 0 || len(other) > 0 {
		t.Fatalf("%d requests at once: %d refused at the rate, other errors %v", n, refused, other)
	}
}
