// Package acptest helps tests that run ACP agents: it locates the real
// agents .ci/run installs, and gives fake agents the methods they do not
// script.
package acptest

import (
	"context"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// ExampleAgentInstall is how .ci/run installs the ACP Go SDK's example
// agent.
const ExampleAgentInstall = "go install github.com/coder/acp-go-sdk/example/agent@v0.13.0"

// ExampleAgent locates the example agent. Locally a missing one skips the
// test; in CI (CI=true) it fails it, so that a missing install never
// passes as a skip.
func ExampleAgent(t testing.TB) string {
	t.Helper()
	p := filepath.Join(build.Default.GOPATH, "bin", "agent")
	if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
		return p
	}
	if p, err := exec.LookPath("agent"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the ACP example agent is not installed: %s", ExampleAgentInstall)
	}
	t.Skipf("the ACP example agent is not installed (%s)", ExampleAgentInstall)
	return ""
}

// Unscripted answers the agent-side requests a fake agent does not
// script; embed it.
type Unscripted struct{}

func (Unscripted) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}
func (Unscripted) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (Unscripted) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (Unscripted) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (Unscripted) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, nil
}
func (Unscripted) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (Unscripted) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}
