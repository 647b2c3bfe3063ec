// Command node runs subactor. Its run subcommand does the main job on the
// embedded default (the scripted model, an in-memory store, no key, no
// network): a top-level agent surveys a directory, delegating one child per
// sub-folder, and prints each child's progress and the final answer.
//
//	node run [-dir .] [-max-depth 3] [-quiet]
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
