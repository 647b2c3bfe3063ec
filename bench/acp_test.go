package bench

import (
	"context"
	"os"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// fakeACP, when set in the environment, makes the test binary a minimal
// ACP agent that answers every prompt at once: ACPChild's harness is
// tested in milliseconds, without the example agent's five-second turn.
const fakeACP = "SUBACTOR_BENCH_FAKE_ACP"

func init() {
	if os.Getenv(fakeACP) == "" {
		return
	}
	a := &instantAgent{}
	a.conn = sdk.NewAgentSideConnection(a, &lockedStdout{}, os.Stdin)
	<-a.conn.Done()
	os.Exit(0)
}

// lockedStdout keeps the SDK's messages whole lines.
type lockedStdout struct{ mu sync.Mutex }

func (l *lockedStdout) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.Stdout.Write(b)
}

type instantAgent struct{ conn *sdk.AgentSideConnection }

func (a *instantAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber}, nil
}
func (a *instantAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	return sdk.NewSessionResponse{SessionId: "instant"}, nil
}
func (a *instantAgent) Prompt(_ context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	_ = a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText("done")})
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}
func (a *instantAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}
func (a *instantAgent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *instantAgent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *instantAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *instantAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, nil
}
func (a *instantAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *instantAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}

// The harness measures every sample's start, turn, exit and dispose, and the
// agent processes are gone when it returns (goleak checks the goroutines
// that watch them).
func TestACPChildHarness(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A race-enabled agent would sleep a second at exit.
	env := map[string]string{fakeACP: "1", "GORACE": "atexit_sleep_ms=0"}
	r, err := ACPChild(context.Background(), self, nil, env, "go", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Distribution{r.Start, r.Turn, r.Exit, r.Dispose, r.Total} {
		if d.Samples != 3 || !(d.P50 > 0) {
			t.Fatalf("result %+v", r)
		}
	}
	if _, err := ACPChild(context.Background(), self, nil, env, "go", 0); err == nil {
		t.Fatal("no samples measured nothing without an error")
	}
}
