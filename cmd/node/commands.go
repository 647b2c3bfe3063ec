package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
)

// Exit codes (documented in the README and the help).
const (
	exitOK     = 0
	exitFailed = 1 // the command could not be done, or the run did not complete
	exitUsage  = 2
)

// command is one subcommand: its usage lines (after the program's name),
// a one-line summary, what it does, its flags (a fresh set, for the help)
// and its body.
type command struct {
	name  string
	uses  []string
	short string
	long  string
	flags func() *flag.FlagSet
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands are the node's subcommands in the order the help lists them.
// {prog} in a text stands for the name the program was invoked by.
func commands() []command {
	return []command{
		{name: "run", uses: []string{"run [-dir DIR] [flags]", "run -continue SESSION [flags] [prompt...]", "run -cluster -provider NAME,... (-peers LIST | -etcd ENDPOINTS) [flags]"},
			short: "survey a directory: a top-level agent delegates one child per sub-folder",
			long: `A top-level agent surveys DIR, delegating one child per sub-folder, and sums
their figures and folders (the scripted model, no network, unless a model
is configured: see {prog} help). It prints "session <id>" and the answer on
stdout; the children's progress and the token usage ("usage: input=<n>
output=<n> cached=<n>", children's included) go to stderr. -json prints
one JSON object per line on stdout instead.

With -continue, the top-level SESSION's agent is loaded from its log and
runs again on the prompt, or goes on as it stopped without one; the
directory is the one the session surveyed.

With -cluster, the top agent also gets a delegate tool per -provider NAME
(named as -config's servers are) whose children run on cluster members
offering it; it first waits, saying so, for a member offering each NAME.
The NAMEs are given, not taken from what members offer, so that the top
agent's tools are the user's choice.`,
			flags: func() *flag.FlagSet { return runFlags(&options{}) }, run: runCommand},
		{name: "sessions", uses: []string{"sessions [-data DIR] [-json] [SESSION]"},
			short: "list the top-level sessions, or one session and its children",
			long: `One line per session: "<id> turns=<n> state=<state> prompt=<first prompt,
quoted>" (an ACP child adds "server=<name> agent-session=<id>" before
prompt), children indented by two spaces a level; state is the stop reason
of the session's last run, or running/interrupted. It only reads, and
beside a running node it asks that node for the list.`,
			flags: func() *flag.FlagSet { return sessionsFlags(new(dataPlace), new(bool)) }, run: sessionsCommand},
		{name: "check", uses: []string{"check [-data DIR] [-repair]"},
			short: "verify the data directory's sessions.db, or repair it",
			long: `Verify the data directory's sessions.db: bbolt's pages, then every session
and task; print a "damaged: ..." line for each damage and exit 1 if there
is any. With -repair, copy everything that reads back whole into a fresh
sessions.db and keep the damaged file beside it
(sessions.db.damaged-TIME); exit 1 if something could not be read.`,
			flags: func() *flag.FlagSet { return checkFlags(&checkOptions{}) }, run: checkCommand},
		{name: "delegate", uses: []string{"delegate -config FILE [-provider NAME] [flags] PROMPT...", "delegate -config FILE -continue SESSION [flags] PROMPT...", "delegate -cluster -provider NAME (-peers LIST | -etcd ENDPOINTS) [flags] PROMPT..."},
			short: "start one child on an ACP agent server, or on a cluster member",
			long: `Start one child on an ACP agent server of FILE with the prompt, show its
progress on stderr, then print a blank line and its output on stdout; exit
0 only when it completed (1 otherwise, its stop reason on stderr). It runs
in -dir unless its entry gives "dir"; its parent is a top-level session of
its own in the data directory, and the child takes follow-ups (send, or
-continue with the delegate session). With -cluster, the child runs on a
member offering the agent server -provider, and the hosting member is named.`,
			flags: func() *flag.FlagSet { return delegateFlags(&delegateOptions{}) }, run: delegateCommand},
		{name: "send", uses: []string{"send -config FILE [flags] SESSION CHILD MESSAGE..."},
			short: "send a follow-up to the child of a delegate session",
			long: `Send a follow-up to the child CHILD of the delegate session SESSION: the
child is resumed from its log with the message (ACP session/load) and shown
as delegate shows it.`,
			flags: func() *flag.FlagSet { return sendFlags(&sendOptions{}) }, run: sendCommand},
		{name: "tasks", uses: []string{"tasks [-data DIR] [-json] SESSION"},
			short: "list the tasks of a session",
			long: `One line per task of SESSION: "<id> child=<session> provider=<name>
state=<state>" (running, stopping, completed, failed, killed, or interrupted
when the node running it ended). An unknown SESSION is an error.`,
			flags: func() *flag.FlagSet { return tasksFlags(new(dataPlace), new(bool)) }, run: tasksCommand},
		{name: "serve", uses: []string{"serve -listen HOST:PORT (-peers LIST | -etcd ENDPOINTS) (-config FILE | -offer-model NAME) [flags]"},
			short: "join or form a cluster and host runs for its members",
			long: `Join or form a cluster and host runs of FILE's agent servers (and, with
-offer-model, of children on the node's model, which can be steered) for
its peers until SIGINT or SIGTERM, then leave gracefully and exit 0. The
cluster flags not given are read from the "cluster" object of -config FILE.`,
			flags: func() *flag.FlagSet { return serveFlags(&serveOptions{}) }, run: serveCommand},
		{name: "status", uses: []string{"status (-peers LIST | -etcd ENDPOINTS) [-json] [flags]"},
			short: "list the cluster's members",
			long: `One line per member (this command's own client is not one):
"<id> <address> providers=[...] capacity=<n> runs=<n>".`,
			flags: func() *flag.FlagSet { return statusFlags(&clusterOptions{}, new(string), new(bool)) }, run: statusCommand},
		{name: "acp", uses: []string{"acp [-config FILE] [-data DIR] [flags]"},
			short: "be an ACP agent on stdin and stdout, for editors (Zed, JetBrains, Neovim)",
			long: `Speak the Agent Client Protocol (v1) as an agent on stdin and stdout until
stdin ends. Each session is a top-level session in the data directory,
working in the client's cwd; its prompts run a top agent on the node's
model that delegates to children (the subagent tool, and a tool per agent
server of -config FILE). Each child is shown as a tool call updated with
its progress and result; session/cancel cancels the turn and every child;
session/load replays a session and continues it. Only ACP frames go to
stdout; logs go to stderr.`,
			flags: func() *flag.FlagSet { return faceFlags("acp", &options{}, nil) }, run: acpCommand},
		{name: "mcp", uses: []string{"mcp [-config FILE] [-data DIR] [flags]", "mcp -listen HOST:PORT [-tls-cert FILE -tls-key FILE] [flags]"},
			short: "be an MCP server on stdin and stdout, for MCP hosts (Claude Code, Codex)",
			long: `Serve the Model Context Protocol over stdin and stdout until stdin ends.
Its tools delegate to the node's providers (spawn, children on the node's
model working in the current directory, and each agent server of -config
FILE): delegate (the child's answer, structured with an output_schema; or
in the background), send (a follow-up to a background child), tasks,
task_result, kill and providers. A delegation's events go out as progress
notifications when the client gives a progress token, and
notifications/cancelled cancels it. The children are those of a top-level
session in the data directory. Only MCP frames go to stdout; logs go to
stderr. With -listen HOST:PORT it serves streamable HTTP instead, each
client session with children of its own, on loopback only unless given
-tls-cert and -tls-key.`,
			flags: func() *flag.FlagSet { return faceFlags("mcp", &options{}, &listenOptions{}) }, run: mcpCommand},
		{name: "version", uses: []string{"version"},
			short: "print the module version and the commit it was built from",
			long:  `Print the module path and version, and the commit it was built from.`,
			flags: versionFlags, run: versionCommand},
	}
}

// rootHelp is the help's text after the list of commands.
const rootHelp = `Run '{prog} help COMMAND' or '{prog} COMMAND -h' for a command's usage and flags.

Streams and exit codes: the answer, the session id and -json lines go to
stdout; progress, help asked for by mistake and diagnostics go to stderr.
Exit 0 when the command completed, 1 when it failed (or its run did not
complete), 2 on a usage or configuration error, 130 when interrupted by
Ctrl-C (SIGINT) and 143 by SIGTERM (128 + the signal's number).

Sessions are kept in the data directory (file sessions.db): -data DIR, else
$SUBACTOR_DATA_DIR, else $XDG_DATA_HOME/subactor, else
~/.local/share/subactor, created (0700) when missing. -data :memory: keeps
them in memory, gone when the process ends. One node at a time can use a
data directory.

Models: the embedded scripted model unless one is configured.
$OPENAI_BASE_URL, $OPENAI_API_KEY and $OPENAI_MODEL select any
OpenAI-compatible endpoint (OpenAI's own when only the key is set);
$DEEPSEEK_API_KEY alone selects DeepSeek (deepseek-chat). -base-url and
-model override $OPENAI_BASE_URL and $OPENAI_MODEL. Keys are read from the
environment only, never from a flag, so that they stay out of shell
history. -models FILE names several endpoints instead, as JSON:
{"endpoints": {"NAME": {"baseURL": "...", "model": "...", "models": ["..."],
"apiKeyEnv": "VAR", "headerTimeout": "5m", "idleTimeout": "10m",
"callTimeout": "1h"}}, "default": "NAME"}; unknown or repeated keys (keys
are case-sensitive) and nulls are errors. A bad model configuration exits
2. A model request that gets no response headers within -header-timeout,
no chunk within -idle-timeout (keep-alives do not count) or no end within
-call-timeout is retried, like a 429 or 5xx; an endpoint's own keys win
over the flags.

Progress: on a terminal, one live row per running child and a line per
child that ended; otherwise plain lines "child <id> started", "child <id>
step <n> <what>", "child <id> ended: <stop reason> in <time>". -json prints
one JSON object per line instead: {"type":"node/session"}, then every child
event ("subagent/start", "subagent/progress", "subagent/end" with runId,
sessionId, provider, kind, step, text, stopReason, usage...), then
{"type":"node/result"} with stopReason, answer and usage.

ACP agents: -config FILE (run and delegate) names agent servers the way
editors do: {"agent_servers": {"NAME": {"command": "...", "args": ["..."],
"env": {"VAR": "..."}}}}, plus our own keys "dir" (absolute), "permissions"
(read-only, the default, allow-all or reject-all), "read_files" and
"write_files" (booleans), "start_timeout" (how long the agent may take to
start, as "90s" or "2m"; 60s by default). Unknown keys are errors; a bad
file exits 2. With -config, run gives its top agent one delegate tool per
server, named after it (subagent_NAME when that name is taken). Many agents
start through "#!/usr/bin/env node": a program named node first on PATH
shadows Node.js for them, so build this one under another name (go build
-o subactor ./cmd/node).

Stopping: the first Ctrl-C, SIGTERM or SIGHUP cancels the run and stops
its agents gracefully; a second one kills every agent (SIGKILL) and ends
the node at once. Agents that a killed node left behind are ended by the
next run or delegate on the same data directory (Linux).
`

// cli runs the command line args and returns the process's exit code.
// The subcommands are a cobra tree (dispatch, help CMD, suggestions for
// an unknown command); each parses its own flags with the standard
// library's flag package, so that they keep Go's one-dash form (-dir).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: no command given\n", prog)
		shortRootUsage(stderr)
		return exitUsage
	}
	if args[0] == "-help" {
		args = []string{"help"}
	}
	code := exitOK
	root := &cobra.Command{
		Use: prog, SilenceErrors: true, SilenceUsage: true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetHelpFunc(func(*cobra.Command, []string) { printRootHelp(stdout) })
	for _, c := range commands() {
		sub := &cobra.Command{Use: c.name, Short: c.short, DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				code = c.run(ctx, args, stdout, stderr)
				return nil
			}}
		sub.SetHelpFunc(func(*cobra.Command, []string) { commandHelp(stdout, c) })
		root.AddCommand(sub)
	}
	root.SetHelpCommand(&cobra.Command{Use: "help", Short: "show the help, or a command's", DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				printRootHelp(stdout)
				return nil
			}
			c, _, err := root.Find(args)
			if err != nil {
				return err
			}
			return c.Help()
		}})
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if _, _, err := root.Find(args); err != nil {
		if msg := runAsNodeJS(args[0]); msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
			return exitUsage
		}
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", prog, strings.TrimSpace(err.Error()))
		shortRootUsage(stderr)
		return exitUsage
	}
	return code
}

// progText is s with {prog} replaced by the program's name.
func progText(s string) string { return strings.ReplaceAll(s, "{prog}", prog) }

// printRootHelp prints the help: the commands, with their usage lines,
// then what they share.
func printRootHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags] [arguments]\n\ncommands:\n", prog)
	for _, c := range commands() {
		for _, u := range c.uses {
			fmt.Fprintf(w, "  %s\n", u)
		}
		fmt.Fprintf(w, "        %s\n", c.short)
	}
	fmt.Fprintf(w, "  help [COMMAND]\n        show this help, or a command's\n\n%s", progText(rootHelp))
}

// shortRootUsage is what follows an error of the command line itself.
func shortRootUsage(w io.Writer) {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "usage: %s <command> [flags] [arguments]\ncommands: %s, help\nRun '%s help' for more.\n", prog, strings.Join(names, ", "), prog)
}

// usageLines are c's usage lines under one "usage:".
func usageLines(w io.Writer, c command) {
	for i, u := range c.uses {
		lead := "usage:"
		if i > 0 {
			lead = "      "
		}
		fmt.Fprintf(w, "%s %s %s\n", lead, prog, u)
	}
}

// commandHelp prints c's help: its usage, what it does and its flags.
func commandHelp(w io.Writer, c command) {
	usageLines(w, c)
	fmt.Fprintf(w, "\n%s\n", progText(c.long))
	fs := c.flags()
	logLevelFlag(fs)
	if hasFlags(fs) {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// commandNamed is the subcommand whose flag set fs is.
func commandNamed(fs *flag.FlagSet) (command, bool) {
	name := strings.TrimPrefix(fs.Name(), prog+" ")
	i := slices.IndexFunc(commands(), func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands()[i], true
}

// parseFlags parses a command's flags. -h (or -help) prints the command's
// help on stdout and ends it 0; a flag error prints the error, the flags
// nearest to an unknown one and the command's short usage on stderr, and
// ends it 2. When ok is false the command ends with code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	logLevelFlag(fs)
	err := fs.Parse(args)
	if err == nil {
		return exitOK, true
	}
	c, known := commandNamed(fs)
	if errors.Is(err, flag.ErrHelp) {
		if known {
			commandHelp(stdout, c)
		}
		return exitOK, false
	}
	fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	if typed, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		if near := nearestFlags(fs, strings.TrimPrefix(typed, "-")); len(near) > 0 {
			fmt.Fprintf(stderr, "did you mean -%s?\n", strings.Join(near, " or -"))
		}
	}
	if known {
		usageLines(stderr, c)
		fmt.Fprintf(stderr, "Run '%s %s -h' for its flags.\n", prog, c.name)
	}
	return exitUsage, false
}

// nearestFlags are the names of fs's flags nearest to typed: those it
// begins, or else those at the least edit distance, at most 2.
func nearestFlags(fs *flag.FlagSet, typed string) []string {
	var prefixed, near []string
	best := 3
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, typed) {
			prefixed = append(prefixed, f.Name)
		}
		switch d := levenshtein.ComputeDistance(typed, f.Name); {
		case d < best:
			best, near = d, []string{f.Name}
		case d == best:
			near = append(near, f.Name)
		}
	})
	if len(prefixed) > 0 {
		return prefixed
	}
	return near
}

// versionFlags is version's flag set: no flags but -h.
func versionFlags() *flag.FlagSet { return flag.NewFlagSet(prog+" version", flag.ContinueOnError) }

// versionCommand prints the main module's path and version and the
// commit it was built from (runtime/debug.ReadBuildInfo).
func versionCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := versionFlags()
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s version: unexpected argument %q\n", prog, fs.Arg(0))
		return exitUsage
	}
	fmt.Fprintln(stdout, versionText())
	return exitOK
}

// versionText is "<module> <version>", then the commit, its time and
// "modified" when the tree had changes, and the Go version.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown version (built without module support)"
	}
	s := info.Main.Path + " " + info.Main.Version
	set := map[string]string{}
	for _, kv := range info.Settings {
		set[kv.Key] = kv.Value
	}
	switch rev := set["vcs.revision"]; rev {
	case "":
		s += "\ncommit unknown (built without version control information, -buildvcs=false)"
	default:
		s += "\ncommit " + rev
		if t := set["vcs.time"]; t != "" {
			s += " (" + t + ")"
		}
		if set["vcs.modified"] == "true" {
			s += ", modified"
		}
	}
	return s + "\n" + info.GoVersion
}
