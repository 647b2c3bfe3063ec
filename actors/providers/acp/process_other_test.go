//go:build !unix

package acp_test

import (
	"errors"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract P3: where there are no Unix process groups for the ladder to
// signal, Start says so with a typed error, before any process runs.
func TestP3_StartWithoutProcessGroupsIsATypedError(t *testing.T) {
	sys := newSystem(t)
	_, err := newProvider(t, fakeConfig(t, sys, modeNormal)).Start(testkit.Ctx(t), subagent.Scope{}, request("say hi"))
	var se *acp.StartError
	if !errors.Is(err, errors.ErrUnsupported) || !errors.As(err, &se) || se.Step != "launch" {
		t.Fatalf("Start: %v, want a launch *StartError wrapping errors.ErrUnsupported", err)
	}
}
