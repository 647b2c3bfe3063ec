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
//	node run [-dir .] [-max-depth 3] [-quiet] [-json] [-data DIR] [-base-url URL] [-model NAME] [-models FILE]
//	node run -continue SESSION [flags] [prompt...]
//	node sessions [-data DIR] [SESSION]
//	node help
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the run; a second one kills the process.
	context.AfterFunc(ctx, stop)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
