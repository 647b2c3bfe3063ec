// Command node runs subactor. Its run subcommand does the main job on the
// embedded default (the scripted model, no key, no network) or on any
// OpenAI-compatible endpoint configured the ecosystem's way
// (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, DEEPSEEK_API_KEY; -base-url
// and -model; several named endpoints with -models FILE): a top-level agent
// surveys a directory, delegating one child per sub-folder, and prints its
// session id, each child's progress (live on a terminal, plain lines
// otherwise, JSON lines with -json), the token usage and the final answer.
// Sessions are kept on disk, in a bbolt file in the data directory
// (-data, $SUBACTOR_DATA_DIR, $XDG_DATA_HOME/subactor or
// ~/.local/share/subactor), so that a run can be continued and its
// sessions listed later.
//
// Its delegate subcommand starts one child on an out-of-process agent
// speaking the Agent Client Protocol, named in a -config file of the shape
// editors use ({"agent_servers": {"NAME": {"command", "args", "env"}}}),
// shows its progress and prints its output; with -config, run gives its top
// agent a delegate tool per agent server too.
//
// Build it under another name than node (go build -o subactor ./cmd/node):
// a program called node early on PATH shadows Node.js for the many agents
// that start through "#!/usr/bin/env node". Its help and errors use the
// name it was invoked by.
//
//	node run [-dir .] [-max-depth 3] [-quiet] [-json] [-data DIR] [-base-url URL] [-model NAME] [-models FILE] [-config FILE]
//	node run -continue SESSION [flags] [prompt...]
//	node sessions [-data DIR] [SESSION]
//	node delegate -config FILE [-provider NAME] [-dir DIR] [-data DIR] [-json] [-quiet] PROMPT...
//	node help
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/subactor/subactor/internal/agentproc"
)

// stopSignals end the node gracefully the first time (the run is
// cancelled, its children disposed and their agents stopped on the
// ladder) and at once the second, after SIGKILL to every agent: Ctrl-C,
// a kill, a closed terminal.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	prog = filepath.Base(os.Args[0])
	if err := harden(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: warning: %v\n", prog, err)
	}
	// Orphans of agents become the node's, to be ended with their agent
	// and reaped; where the system cannot, the ladder does without.
	stopAdopting, err := agentproc.AdoptOrphans()
	if err != nil {
		stopAdopting = func() {}
	}
	signals := make(chan os.Signal, 2)
	for _, sig := range stopSignals {
		// One ignored at start (nohup, a background job of a script)
		// stays ignored.
		if !signal.Ignored(sig) {
			signal.Notify(signals, sig)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan os.Signal, 1)
	dying := make(chan struct{})
	go func() {
		stopped <- <-signals
		cancel()
		sig := <-signals
		close(dying)
		agentproc.KillAgents()
		die(sig)
	}()
	// Trace and metric export, when the OTEL_* variables ask for it;
	// flushed before the node exits, also after a first stop signal.
	flush, err := telemetry(ctx, os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: warning: %v\n", prog, err)
	}
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopAdopting()
	flush()
	select {
	case sig := <-stopped:
		code = interrupted(code, sig, os.Stderr)
	default:
	}
	select {
	case <-dying:
		// Killing the agents may have let the command end: the node
		// still ends by the second signal, which die is delivering.
		select {}
	default:
	}
	os.Exit(code)
}

// interrupted is the exit code of a command that returned code after sig
// stopped it: 128 + the signal's number (130 for Ctrl-C, 143 for
// SIGTERM), with "interrupted" on stderr, unless it completed all the
// same (serve, whose normal end is a signal, or a run that finished
// first).
func interrupted(code int, sig os.Signal, stderr io.Writer) int {
	if code == exitOK {
		return code
	}
	fmt.Fprintf(stderr, "%s: interrupted\n", prog)
	n, _ := sig.(syscall.Signal)
	return 128 + int(n)
}

// die ends the node by sig, as its default action would have, so that a
// shell sees how it ended; exit code 128+sig if that does not happen
// within a second.
func die(sig os.Signal) {
	signal.Reset(sig)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Signal(sig)
	}
	time.Sleep(time.Second)
	n, _ := sig.(syscall.Signal)
	os.Exit(128 + int(n))
}
