package main

// The fake ACP agent of the node's tests: the test binary re-executed with
// envFakeAgent set (TestMain runs it instead of the tests). It answers
// every prompt at once, so that the delegate command's own behaviour is
// tested in milliseconds; the real agents' tests are in agents_test.go.
//
// A prompt starting with "refuse" is refused, one starting with "wait"
// blocks until the turn is cancelled, "environ" answers what reading the
// node's environment (/proc/PPID/environ) gave, one starting with
// "hostile" writes terminal escapes everywhere it can (clean_test.go),
// "gate FIFO" says "gated" and blocks until the test opens the named FIFO
// for writing and closes it, then is echoed as any other; "files PATH"
// reads PATH and writes PATH.out through its client and tries a path
// outside (node acp's editor relay); any other is
// echoed as
// "echo: <prompt>" after a plan and a read tool call. With
// envFakeAgentHistory naming a directory, the agent keeps each session's
// prompts in a file there and can load a session (session/load) in a
// later process: its echo then ends " (earlier: <prompts>)".
//
// With envFakeFamily set to a directory it is a stubborn agent with a
// family (see startFamily), for the tests of what a dying node leaves.

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit/acptest"
)

// envFakeAgent makes the test binary the fake agent; its value is its
// mode: fakeHangInit never answers initialize, modeSleeper is a member of
// a stubborn agent's family instead, any other answers.
const envFakeAgent = "NODETEST_FAKE_ACP_AGENT"

// envFakeAgentHistory is the directory where the fake agent keeps its
// sessions' prompts, so that it can load them.
const envFakeAgentHistory = "NODETEST_FAKE_ACP_HISTORY"

const fakeHangInit = "hang-init"

// envFakeFamily, a directory, makes the fake agent stubborn: it ignores
// SIGTERM, SIGPIPE and the end of its input, and starts a family of sleepers (see
// startFamily) whose pids it writes to familyPids in the directory. It
// writes familyWaiting there when its "wait" turn begins and
// familyCancelled when that turn is cancelled.
const envFakeFamily = "NODETEST_FAMILY"

// Files of the family directory.
const (
	familyPids      = "pids"      // "LEADER MEMBER RUNAWAY CLEAN"
	familyWaiting   = "waiting"   // its "wait" turn has begun
	familyCancelled = "cancelled" // its turn was cancelled
)

// modeSleeper is a family member: it ignores SIGTERM, says "ready" on
// stdout and sleeps until killed.
const modeSleeper = "sleeper"

// runFakeAgent is the fake agent's main: it serves ACP on stdio until its
// input ends.
func runFakeAgent() int {
	if os.Getenv(envFakeAgent) == modeSleeper {
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		blockForever()
	}
	a := &fakeAgent{mode: os.Getenv(envFakeAgent), family: os.Getenv(envFakeFamily)}
	if a.family != "" {
		// Nor does it die writing to a node that is gone.
		signal.Ignore(syscall.SIGTERM, syscall.SIGPIPE)
		if err := startFamily(a.family); err != nil {
			fmt.Fprintln(os.Stderr, "fake agent:", err)
			return 4
		}
	}
	a.conn = sdk.NewAgentSideConnection(a, &lockedStdout{}, os.Stdin)
	<-a.conn.Done()
	if a.family != "" {
		blockForever()
	}
	return 0
}

func blockForever() {
	<-time.NewTimer(time.Duration(math.MaxInt64)).C
}

// lockedStdout keeps the SDK's messages whole lines.
type lockedStdout struct{ mu sync.Mutex }

func (l *lockedStdout) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.Stdout.Write(b)
}

type fakeAgent struct {
	acptest.Unscripted
	mode   string
	conn   *sdk.AgentSideConnection
	family string
}

func (a *fakeAgent) Initialize(ctx context.Context, _ sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	if a.mode == fakeHangInit {
		<-ctx.Done() // the connection's end: the node closed our input
		return sdk.InitializeResponse{}, ctx.Err()
	}
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: os.Getenv(envFakeAgentHistory) != ""}}, nil
}

// history is the file of a session's prompts, or "" without
// envFakeAgentHistory.
func history(id sdk.SessionId) string {
	dir := os.Getenv(envFakeAgentHistory)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, string(id))
}

// earlier is the prompts of a session's earlier turns.
func earlier(id sdk.SessionId) []string {
	data, _ := os.ReadFile(history(id))
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// LoadSession replays the session's earlier prompts, as agents do.
func (a *fakeAgent) LoadSession(_ context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if history(p.SessionId) == "" {
		return sdk.LoadSessionResponse{}, sdk.NewMethodNotFound("session/load")
	}
	if _, err := os.Stat(history(p.SessionId)); err != nil {
		return sdk.LoadSessionResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	for _, prompt := range earlier(p.SessionId) {
		_ = a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateUserMessageText(prompt)})
	}
	return sdk.LoadSessionResponse{}, nil
}

func (a *fakeAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(fmt.Sprintf("fake-%d", os.Getpid()))}, nil
}

// Prompt answers one turn; ctx ends on session/cancel.
func (a *fakeAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	var text strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	prompt := text.String()
	before := earlier(p.SessionId)
	if path := history(p.SessionId); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		_, err = fmt.Fprintln(f, prompt)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return sdk.PromptResponse{}, err
		}
	}
	// Not the turn's ctx: a cancelled turn still reports.
	update := func(u sdk.SessionUpdate) {
		_ = a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: p.SessionId, Update: u})
	}
	switch {
	case strings.HasPrefix(prompt, "refuse"):
		update(sdk.UpdateAgentMessageText("I will not do that."))
		return sdk.PromptResponse{StopReason: sdk.StopReasonRefusal}, nil
	case strings.HasPrefix(prompt, "hostile"):
		return hostileTurn(prompt, update)
	case strings.HasPrefix(prompt, "wait"):
		update(sdk.UpdateAgentMessageText("waiting"))
		if a.family != "" {
			_ = os.WriteFile(filepath.Join(a.family, familyWaiting), nil, 0o644)
		}
		<-ctx.Done()
		if a.family != "" {
			_ = os.WriteFile(filepath.Join(a.family, familyCancelled), nil, 0o644)
		}
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	case strings.HasPrefix(prompt, "gate "):
		update(sdk.UpdateAgentMessageText("gated"))
		// Opening a FIFO to read blocks until a writer opens it.
		if err := readGate(strings.TrimPrefix(prompt, "gate ")); err != nil {
			return sdk.PromptResponse{}, err
		}
	case strings.HasPrefix(prompt, "files "):
		// files PATH: read PATH, write PATH.out, and try a path outside
		// the working directory, through the client.
		path := strings.TrimPrefix(prompt, "files ")
		var out strings.Builder
		if r, err := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: p.SessionId, Path: path}); err != nil {
			fmt.Fprintf(&out, "read error %v; ", err)
		} else {
			fmt.Fprintf(&out, "read %q; ", r.Content)
		}
		if _, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: p.SessionId, Path: path + ".out", Content: "copied"}); err != nil {
			fmt.Fprintf(&out, "write error %v; ", err)
		} else {
			out.WriteString("written; ")
		}
		if _, err := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: p.SessionId, Path: "/etc/hostname"}); err != nil {
			out.WriteString("outside refused")
		} else {
			out.WriteString("outside read")
		}
		update(sdk.UpdateAgentMessageText(out.String()))
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	case prompt == "environ":
		update(sdk.UpdateAgentMessageText("environ: " + parentEnviron()))
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	}
	update(sdk.UpdatePlan(sdk.PlanEntry{Content: "Echo the prompt", Status: sdk.PlanEntryStatusInProgress, Priority: sdk.PlanEntryPriorityHigh}))
	update(sdk.StartToolCall("read-1", "Reading the prompt", sdk.WithStartKind(sdk.ToolKindRead)))
	update(sdk.UpdateToolCall("read-1", sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted)))
	update(sdk.UpdateAgentMessageText("echo: "))
	update(sdk.UpdateAgentMessageText(prompt))
	if len(before) > 0 {
		update(sdk.UpdateAgentMessageText(" (earlier: " + strings.Join(before, ", ") + ")"))
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

// readGate reads the FIFO at path until its writer closes it.
func readGate(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}
