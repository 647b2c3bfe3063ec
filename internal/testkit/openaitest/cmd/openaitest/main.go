// Command openaitest serves a scripted OpenAI-compatible API on a loopback
// port, for tests that drive a separate process (a third-party agent) with
// OPENAI_BASE_URL:
//
//	go run ./internal/openaitest/cmd/openaitest -addr 127.0.0.1:0 -script FILE [-record FILE]
//
// It prints the base URL (ending in /v1) as its first line on stdout and
// serves until interrupted. The script is a JSON openaitest.Script; -record
// writes every finished request as one JSON line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/subactor/subactor/internal/testkit/openaitest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "openaitest:", err)
		os.Exit(2)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("openaitest", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	script := fs.String("script", "", "JSON script file (required)")
	record := fs.String("record", "", "file to append every finished request to, as JSON lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *script == "" {
		return errors.New("-script is required")
	}
	sc, err := openaitest.LoadScript(*script)
	if err != nil {
		return err
	}
	var rec io.Writer
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		rec = f
	}
	srv, err := openaitest.Listen(*addr, sc, rec)
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(stdout, srv.URL); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
