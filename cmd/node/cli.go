package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
	exitFailed = 1 // the command could not be done, or the run did not complete
	exitUsage  = 2
)

const usageHeader = `usage: node <command> [flags] [arguments]

commands:
  run [-dir DIR] [flags]
         survey a directory: a top-level agent delegates one child per
         sub-folder and sums their figures and folders (scripted model,
         no network); prints "session <id>" first, then progress, then
         the answer
  run -continue SESSION [flags] [prompt...]
         continue a top-level session: its agent is loaded from its log
         and runs again on the prompt, or goes on as it stopped without
         one; the directory is the one the session surveyed
  sessions [-data DIR] [SESSION]
         list the top-level sessions, or SESSION and its children, one per
         line: "<id> turns=<n> state=<state> prompt=<first prompt, quoted>",
         children indented by two spaces a level; state is the stop reason
         of the session's last run, or running/interrupted
  help   show this help

Sessions are kept in the data directory (file sessions.db): -data DIR, else
$SUBACTOR_DATA_DIR, else $XDG_DATA_HOME/subactor, else
~/.local/share/subactor, created (0700) when missing. -data :memory: keeps
them in memory, gone when the process ends. One node at a time can use a
data directory.
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
	case "sessions":
		return sessionsCommand(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "node: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

// runCommand runs the run subcommand: the session id, progress and the
// answer on stdout, errors on stderr.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseRun(args, stderr)
	if !ok {
		return code
	}
	progress := stdout
	if o.quiet {
		progress = io.Discard
	}
	answer, err := survey(ctx, o, stdout, progress, stderr)
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

// options are the flags and arguments of run.
type options struct {
	dir      string
	maxDepth int
	quiet    bool
	data     string
	// cont is the session to continue, prompt what to tell it.
	cont   string
	prompt string
}

func runFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("node run", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", ".", "the `DIR` to survey (not with -continue: the session's own is used)")
	fs.IntVar(&o.maxDepth, "max-depth", delegate.DefaultMaxDepth, "the deepest delegation level below the top-level agent; 0 surveys without children")
	fs.BoolVar(&o.quiet, "quiet", false, "print the session id and the answer only, no progress")
	dataFlag(fs, &o.data)
	fs.StringVar(&o.cont, "continue", "", "continue the top-level `SESSION` (its id); arguments after the flags are the prompt")
	return fs
}

// dataFlag defines -data on fs.
func dataFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "data", "", "the data `DIR` where sessions are kept (default $"+envDataDir+", else $XDG_DATA_HOME/subactor, else ~/.local/share/subactor); "+memoryData+" keeps them in memory")
}

func usage(w io.Writer) {
	fmt.Fprint(w, usageHeader)
	for _, fs := range []*flag.FlagSet{runFlags(&options{}), sessionsFlags(new(string))} {
		fmt.Fprintf(w, "\nflags of %s:\n", strings.TrimPrefix(fs.Name(), "node "))
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["continue"] && o.cont == "":
		fmt.Fprintln(stderr, "node run: -continue needs a session id")
		return o, exitUsage, false
	case o.cont != "" && set["dir"]:
		fmt.Fprintln(stderr, "node run: -dir cannot be used with -continue: a session surveys the directory it started with")
		return o, exitUsage, false
	case o.cont == "" && fs.NArg() > 0:
		fmt.Fprintf(stderr, "node run: unexpected argument %q (a prompt is given only with -continue)\n", fs.Arg(0))
		return o, exitUsage, false
	case o.maxDepth < 0:
		fmt.Fprintf(stderr, "node run: -max-depth %d must not be negative\n", o.maxDepth)
		return o, exitUsage, false
	}
	o.prompt = strings.Join(fs.Args(), " ")
	return o, exitOK, true
}

// kindSurvey marks the log-only record a node run's top-level session
// starts with: which directory it surveys, so that -continue works from
// any working directory. Log-only, it survives compaction (D4).
const kindSurvey = "node/survey"

// surveyed is the data of a kindSurvey record.
type surveyed struct {
	// Dir is the directory's absolute path, Name how the user gave it:
	// the name the prompt, the tools and the answer use.
	Dir  string `json:"dir"`
	Name string `json:"name"`
}

// task is the survey's prompt.
func (s surveyed) task() string { return "survey " + filepath.ToSlash(s.Name) }

// Errors of -continue, wrapped with the session id.
var (
	errUnknownSession = errors.New("no such session")
	errNotTopLevel    = errors.New("not a top-level session")
	errNotNodeSession = errors.New("not a session of node run (it records no directory)")
)

// survey wires the embedded default and runs the top-level agent: a new
// session on "survey <o.dir>", or the session o.cont continued. It writes
// "session <id>" to out once the session exists, the children's progress
// to progress and warnings to logs. The file tools are confined to the
// directory and name it as the user gave it, so the prompt, the children's
// paths and the answer all say which directory was surveyed. It returns
// the agent's answer, or an error when the run could not be done or did
// not complete. Everything it starts is closed before it returns.
func survey(ctx context.Context, o options, out, progress, logs io.Writer) (string, error) {
	data, err := dataDir(o.data)
	if err != nil {
		return "", err
	}
	target := surveyed{Name: o.dir}
	if o.cont == "" {
		// Checked before the data directory is touched: a run that
		// cannot start leaves nothing behind.
		if target.Dir, err = readableDir(o.dir); err != nil {
			return "", err
		}
	}
	// A continued session must exist already: no directory is created
	// for it.
	store, closeStore, err := openStore(data, o.cont == "")
	if err != nil {
		return "", err
	}
	defer closeStore()
	store, closeHooks, err := withCrashHooks(store)
	if err != nil {
		return "", err
	}
	defer closeHooks()

	prompt := o.prompt
	if o.cont != "" {
		var turns int
		if target, turns, err = continued(ctx, store, o.cont); err != nil {
			return "", fmt.Errorf("-continue %s: data directory %q: %w", o.cont, data, err)
		}
		if _, err := readableDir(target.Dir); err != nil {
			return "", err
		}
		if prompt == "" && turns == 0 {
			// Killed before its prompt was stored: start it now.
			prompt = target.task()
		}
	} else {
		prompt = target.task()
	}
	fsTools, err := fstools.NewNamed(target.Dir, target.Name)
	if err != nil {
		return "", fmt.Errorf("cannot read directory %q: %w", target.Name, err)
	}
	prog := newProgress(progress)

	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer sys.Shutdown()
	svc := registry.New(sys)
	defer svc.Close()

	tool := delegate.New(delegate.Config{Service: svc, Provider: spawn.DefaultName, MaxDepth: o.maxDepth})
	defer tool.Close()
	tools := append(fsTools, tool)

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
	cfg := agent.Config{
		Store:   store,
		Header:  subagent.SessionHeader{SessionID: o.cont},
		Resume:  o.cont != "",
		Model:   model,
		Tools:   tools,
		Options: subagent.AgentOptions{MaxDepth: &maxDepth},
	}
	if o.cont == "" {
		rec, err := json.Marshal(target)
		if err != nil {
			return "", err
		}
		cfg.Header.SessionID = uuid.NewString()
		cfg.LogOnly = []persistence.Record{{Kind: kindSurvey, Data: rec}}
	}
	top, err := agent.New(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer top.Close()
	fmt.Fprintf(out, "session %s\n", top.SessionID())
	events := svc.ListenParent(top.SessionID(), prog.event)
	defer events.Release()
	var blocks []subagent.ContentBlock
	if prompt != "" {
		blocks = []subagent.ContentBlock{subagent.Text(prompt)}
	}
	res := top.Run(ctx, blocks, nil)
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

// readableDir returns dir's absolute path, or an error naming dir if it
// cannot be listed.
func readableDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		// Listing catches a directory that opens but cannot be read.
		_, err = os.ReadDir(abs)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read directory %q: %w", dir, err)
	}
	return abs, nil
}

// continued reads what continuing session id needs from its log: the
// directory it surveys and how many turns it has. The session must be a
// top-level one that node run started.
func continued(ctx context.Context, store persistence.Store, id string) (target surveyed, turns int, err error) {
	h, recs, err := store.Load(ctx, id)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return target, 0, errUnknownSession
	case err != nil:
		return target, 0, err
	case h.ParentSessionID != "":
		return target, 0, fmt.Errorf("%w: it is a child of %s (continue that one)", errNotTopLevel, h.ParentSessionID)
	}
	found := false
	for _, r := range recs {
		switch {
		case r.Kind == persistence.KindMessage:
			turns++
		case r.Kind == kindSurvey && !found:
			// The first one is authoritative, as a descriptor's is.
			if err := json.Unmarshal(r.Data, &target); err != nil || target.Dir == "" || target.Name == "" {
				return target, 0, fmt.Errorf("%w: its %s record is malformed", errNotNodeSession, kindSurvey)
			}
			found = true
		}
	}
	if !found {
		return target, 0, errNotNodeSession
	}
	return target, turns, nil
}
