package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
	"github.com/subactor/subactor/tools/fstools"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run could not be done or did not complete
	exitUsage  = 2
)

const usageHeader = `usage: node <command> [flags]

commands:
  run    survey a directory: a top-level agent delegates one child per
         sub-folder and sums their figures and folders (scripted model,
         no network)
  help   show this help

flags of run:
`

// cli runs the command line args and returns the process's exit code.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "node: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

// runCommand runs the run subcommand: progress and the answer on stdout,
// errors on stderr.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseRun(args, stderr)
	if !ok {
		return code
	}
	progress := stdout
	if o.quiet {
		progress = io.Discard
	}
	answer, err := survey(ctx, o, progress, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "node run: %v\n", err)
		return exitFailed
	}
	if !o.quiet {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintln(stdout, answer)
	return exitOK
}

// options are the flags of run.
type options struct {
	dir      string
	maxDepth int
	quiet    bool
}

func runFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("node run", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", ".", "the directory to survey")
	fs.IntVar(&o.maxDepth, "max-depth", delegate.DefaultMaxDepth, "the deepest delegation level below the top-level agent; 0 surveys without children")
	fs.BoolVar(&o.quiet, "quiet", false, "print the answer only, no progress")
	return fs
}

func usage(w io.Writer) {
	fmt.Fprint(w, usageHeader)
	fs := runFlags(&options{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// parseRun parses the flags of run; when ok is false the command ends with
// code (0 after -h).
func parseRun(args []string, stderr io.Writer) (o options, code int, ok bool) {
	fs := runFlags(&o)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, exitOK, false
		}
		return o, exitUsage, false
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "node run: unexpected argument %q\n", fs.Arg(0))
		return o, exitUsage, false
	case o.maxDepth < 0:
		fmt.Fprintf(stderr, "node run: -max-depth %d must not be negative\n", o.maxDepth)
		return o, exitUsage, false
	}
	return o, exitOK, true
}

// survey wires the embedded default and runs the top-level agent on
// "survey <o.dir>", writing the children's progress to progress and
// warnings to logs. The file tools are confined to o.dir and name it as the
// user gave it, so the prompt, the children's paths and the answer all say
// which directory was surveyed. It returns the agent's answer, or an error
// when the run could not be done or did not complete. Everything it starts
// is closed before it returns.
func survey(ctx context.Context, o options, progress, logs io.Writer) (string, error) {
	// fstools.NewNamed opens the root; listing it as well catches a directory
	// that opens but cannot be read.
	fsTools, err := fstools.NewNamed(o.dir, o.dir)
	if err == nil {
		_, err = os.ReadDir(o.dir)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read directory %q: %w", o.dir, err)
	}
	prog := newProgress(progress)

	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()

	topID := uuid.NewString()
	tool := delegate.New(delegate.Config{Service: svc, Provider: spawn.DefaultName, MaxDepth: o.maxDepth})
	defer tool.Close()
	tools := append(fsTools, tool)

	store := persistence.NewMemory()
	model := scripted.New()
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: model, Tools: tools})
	if err != nil {
		return "", err
	}
	release, err := svc.RegisterProvider(provider)
	if err != nil {
		return "", err
	}
	defer release()

	// The option caps the tool's depth too: it takes the tighter of both.
	maxDepth := o.maxDepth
	top, err := agent.New(ctx, agent.Config{
		Store:   store,
		Header:  subagent.SessionHeader{SessionID: topID},
		Model:   model,
		Tools:   tools,
		Options: subagent.AgentOptions{MaxDepth: &maxDepth},
	})
	if err != nil {
		return "", err
	}
	events := svc.ListenParent(topID, prog.event)
	defer events.Release()
	task := "survey " + filepath.ToSlash(o.dir)
	res := top.Run(ctx, []subagent.ContentBlock{subagent.Text(task)}, nil)
	// Every child has settled and been disposed; flushing the listener
	// prints their end lines before the answer, also after a cancel.
	if err := events.Flush(context.WithoutCancel(ctx)); err != nil {
		return "", err
	}
	if res.StopReason != subagent.Completed {
		return "", fmt.Errorf("the survey ended %s: %s", res.StopReason, res.Detail)
	}
	return subagent.TextOf(res.Output), nil
}
