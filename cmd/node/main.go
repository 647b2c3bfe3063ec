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
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	prog = filepath.Base(os.Args[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the run; a second one kills the process.
	context.AfterFunc(ctx, stop)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
