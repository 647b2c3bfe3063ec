package bench

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// ExampleAgentInstall installs the agent ACPChild is measured with: the ACP
// Go SDK's example agent, scripted, no model (.ci/run installs it too).
const ExampleAgentInstall = "go install github.com/coder/acp-go-sdk/example/agent@v0.13.0"

// ExamplePrompt is the prompt its one scripted turn answers: text, a read
// tool call, then a permission request for an edit (rejected by the
// default policy), with pauses of about five seconds in all.
const ExamplePrompt = "Please improve the project"

// FindExampleAgent returns the example agent's path, from the Go bin
// directory or PATH, or "" when it is not installed.
func FindExampleAgent() string {
	if p := filepath.Join(build.Default.GOPATH, "bin", "agent"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("agent"); err == nil {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// ACPResult is an ACP child's life through the Service on the acp
// provider, one child at a time, in microseconds. The turn is the agent's
// own (the example agent's scripted pauses), so what is ours and the
// process's, starting it and ending it, is measured apart from it.
type ACPResult struct {
	Agent   string `json:"agent"` // the command measured
	Samples int    `json:"samples"`
	// Start is Service.Start until the run is published: the process
	// launched in its own group, initialize, session/new and the
	// descriptor stored.
	Start Distribution `json:"start"`
	// Turn is from Start's return until the agent answered the prompt
	// (the run's final text event reached a listener).
	Turn Distribution `json:"turn"`
	// Exit is from that answer until the result settled: the process
	// ended on the shutdown ladder (its stdin closed, its exit awaited)
	// and reaped, before the run settles.
	Exit Distribution `json:"exit"`
	// Dispose is Dispose of the settled run.
	Dispose Distribution `json:"dispose"`
	// Total is start→result→dispose.
	Total Distribution `json:"total"`
	// Skipped, when set, says why nothing was measured.
	Skipped string `json:"skipped,omitempty"`
}

// ACPChild runs samples children of command (with args and env added to
// its environment) one after the other through a Service, each on prompt
// in a fresh working directory with the default read-only permission
// policy, and measures them (see ACPResult). A child that does not
// complete with some output is an error.
func ACPChild(ctx context.Context, command string, args []string, env map[string]string, prompt string, samples int) (ACPResult, error) {
	r := ACPResult{Agent: command, Samples: samples}
	if samples <= 0 {
		return r, errors.New("bench: no samples")
	}
	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()
	store := persistence.NewMemory()
	dir, err := os.MkdirTemp("", "subactor-bench-acp-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	p, err := acp.New(acp.Config{System: sys, Command: command, Args: args, Env: env, Dir: dir, Store: store})
	if err != nil {
		return r, err
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		return r, err
	}
	defer release()
	parent, err := agent.New(ctx, agent.Config{Store: store, Model: scripted.New(), Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		return r, err
	}
	defer parent.Close()
	// The final text is emitted when the agent's answer to session/prompt
	// arrives, before the process is ended.
	answered := make(chan time.Time, 1)
	sub := svc.ListenParent(parent.SessionID(), func(ev subagent.Event) error {
		if p, ok := ev.(subagent.RunProgress); ok && p.Kind == subagent.MessageText {
			answered <- time.Now()
		}
		return nil
	}, registry.OnlyEvents(subagent.TypeOf(subagent.RunProgress{})))
	defer sub.Release()

	var starts, turns, exits, disposes, totals []time.Duration
	for i := range samples {
		began := time.Now()
		run, err := svc.Start(ctx, acp.DefaultName, subagent.StartRequest{Parent: parent, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}})
		if err != nil {
			return r, fmt.Errorf("sample %d: %w", i+1, err)
		}
		started := time.Now()
		res, err := run.Wait(ctx)
		settled := time.Now()
		if derr := run.Dispose(ctx); err == nil {
			err = derr
		}
		ended := time.Now()
		if err == nil && (res.StopReason != subagent.Completed || subagent.TextOf(res.Output) == "") {
			err = fmt.Errorf("%w: %s %q %s", errAnswer, res.StopReason, subagent.TextOf(res.Output), res.Detail)
		}
		if err == nil {
			err = sub.Flush(ctx)
		}
		if err != nil {
			return r, fmt.Errorf("sample %d: %w", i+1, err)
		}
		var at time.Time
		select {
		case at = <-answered:
		default:
			return r, fmt.Errorf("sample %d: no final text event", i+1)
		}
		// The listener's queue may deliver it a little late.
		if at.After(settled) {
			at = settled
		}
		starts, turns, exits = append(starts, started.Sub(began)), append(turns, at.Sub(started)), append(exits, settled.Sub(at))
		disposes, totals = append(disposes, ended.Sub(settled)), append(totals, ended.Sub(began))
	}
	r.Start, r.Turn, r.Exit = distribution(starts), distribution(turns), distribution(exits)
	r.Dispose, r.Total = distribution(disposes), distribution(totals)
	return r, nil
}
