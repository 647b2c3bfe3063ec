package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/ids"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
	"github.com/subactor/subactor/tools/fstools"
)

// runCommand runs the run subcommand: the session id, progress, the usage
// totals and the answer on stdout (with -json, one JSON object per line),
// errors on stderr.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseRun(args, stdout, stderr)
	if !ok {
		return code
	}
	m, err := resolveModels(o, os.Getenv)
	if err == nil && o.config != "" {
		o.servers, err = loadAgentServers(o.config)
		if err == nil {
			err = o.servers.checkBesideSpawn()
		}
		if w := shadowWarning(); err == nil && w != "" {
			fmt.Fprintf(stderr, "%s run: %s\n", prog, w)
		}
	}
	if err == nil && o.cluster {
		if o.remote, err = remoteProviders(o.providers, o.servers); err == nil {
			_, err = o.clusterOpts.config()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s run: %v\n", prog, err)
		return exitCode(err)
	}
	rep := newReporter(o.quiet, o.json, stdout, stderr)
	out, err := survey(ctx, o, m, stdout, rep, stderr)
	if errors.Is(err, errSessionComplete) {
		// Nothing to do, and nothing appended: not a failure.
		fmt.Fprintf(stderr, "%s run: %v\n", prog, err)
		return exitOK
	}
	if err != nil {
		return failed(stderr, "run", err)
	}
	if o.json {
		res := jsonResult{Type: typeResult, SessionID: out.session, StopReason: string(out.res.StopReason), Detail: out.res.Detail, Answer: subagent.TextOf(out.res.Output), Usage: out.res.Usage}
		if err := newEncoder(stdout).Encode(res); err != nil {
			fmt.Fprintf(stderr, "%s run: %v\n", prog, err)
			return exitFailed
		}
	} else if !o.quiet {
		// The last line of the progress, on stderr.
		if out.res.Usage != nil {
			fmt.Fprintln(stderr, usageLine(*out.res.Usage))
		}
		if out.res.StopReason == subagent.Completed {
			fmt.Fprintln(stdout)
		}
	}
	if out.res.StopReason != subagent.Completed {
		fmt.Fprintf(stderr, "%s run: the survey ended %s: %s\n", prog, out.res.StopReason, clean(out.res.Detail))
		return exitFailed
	}
	if !o.json {
		fmt.Fprintln(stdout, clean(subagent.TextOf(out.res.Output)))
	}
	return exitOK
}

// exitCode is the exit code of a command that failed with err before its
// run could end: exitUsage for a configuration the node refuses (models
// or agent servers), exitFailed for anything else.
func exitCode(err error) int {
	var badConfig *configError
	if errors.Is(err, openai.ErrChoice) || errors.As(err, &badConfig) {
		return exitUsage
	}
	return exitFailed
}

// failed prints err, cleaned (it may carry an agent's stderr or an
// endpoint's words), as command's error on stderr and returns its exit
// code.
func failed(stderr io.Writer, command string, err error) int {
	fmt.Fprintf(stderr, "%s %s: %s\n", prog, command, clean(err.Error()))
	return exitCode(err)
}

// newReporter is the progress view a command's flags call for: none with
// quiet, JSON lines on stdout with json, else on stderr (stdout keeps the
// answer alone) the live view when it is a terminal and plain lines
// otherwise.
func newReporter(quiet, json bool, stdout, stderr io.Writer) reporter {
	switch {
	case quiet:
		return newProgress(io.Discard)
	case json:
		return &jsonProgress{enc: newEncoder(stdout)}
	case isTerminal(stderr):
		return newLive(stderr)
	}
	return newProgress(stderr)
}

// options are the flags and arguments of run.
type options struct {
	dir      string
	vcs      bool
	maxDepth int
	quiet    bool
	data     dataPlace
	// cont is the session to continue, prompt what to tell it.
	cont   string
	prompt string
	// json prints JSON lines instead of text.
	json bool
	// The model configuration (see resolveModels).
	baseURL, model, modelsFile string
	limits                     timeLimits
	// config is the -config file of ACP agent servers, servers what it
	// says (set by runCommand).
	config  string
	servers agentServers
	// -cluster: the top agent also delegates to the agent servers
	// -provider names on the cluster's members; remote is that list (set
	// by runCommand).
	cluster     bool
	providers   string
	remote      []string
	clusterOpts clusterOptions
}

func runFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" run", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", ".", "the `DIR` to survey (not with -continue: the session's own is used)")
	fs.BoolVar(&o.vcs, "vcs", false, "survey version control folders (.git, .hg, .svn, .jj) too; they are skipped by default")
	fs.IntVar(&o.maxDepth, "max-depth", delegate.DefaultMaxDepth, "the deepest delegation level below the top-level agent; 0 surveys without children")
	fs.BoolVar(&o.quiet, "quiet", false, "print the session id and the answer only, no progress or usage (with -json: the session and result lines)")
	dataFlag(fs, &o.data)
	fs.StringVar(&o.cont, "continue", "", "continue the top-level `SESSION` (its id); arguments after the flags are the prompt")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line: the session, every child event, then the result")
	modelFlags(fs, o)
	configFlag(fs, &o.config, "the top agent gets a delegate tool per server")
	fs.BoolVar(&o.cluster, "cluster", false, "join the cluster (-peers or -etcd) and give the top agent a delegate tool per -provider, its children placed on members offering it")
	fs.StringVar(&o.providers, "provider", "", "with -cluster, the agent servers `NAME,...` members offer that the top agent may delegate to: named, like -config's, so that its tools do not depend on which members answered first")
	clusterFlags(fs, &o.clusterOpts, "127.0.0.1:0")
	return fs
}

// modelFlags defines the model flags on fs: -base-url, -model, -models
// and the three time limits.
func modelFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.baseURL, "base-url", "", "the OpenAI-compatible endpoint's base `URL`, ending in /v1 (default $"+envBaseURL+"); its key comes from $"+envAPIKey+" only")
	fs.StringVar(&o.model, "model", "", "the `MODEL` to ask for (default $"+envModel+"); with -models, one of the default endpoint's")
	fs.StringVar(&o.modelsFile, "models", "", "a JSON `FILE` naming several model endpoints (see above); replaces the environment's endpoint")
	fs.DurationVar(&o.limits.header, "header-timeout", 0, "how long a model endpoint may take to send its response headers before the request is retried (default "+openai.DefaultHeaderTimeout.String()+"); a -models endpoint's headerTimeout wins")
	fs.DurationVar(&o.limits.idle, "idle-timeout", 0, "how long a model's answer stream may send no chunk (keep-alives do not count) before the request is retried (default "+openai.DefaultIdleTimeout.String()+"); a -models endpoint's idleTimeout wins")
	fs.DurationVar(&o.limits.call, "call-timeout", 0, "how long one model request may take in all before it is retried (default "+openai.DefaultCallTimeout.String()+"); a -models endpoint's callTimeout wins")
}

// dataFlag defines -data and -store on fs.
func dataFlag(fs *flag.FlagSet, p *dataPlace) {
	fs.StringVar(&p.dir, "data", "", "the data `DIR` where sessions are kept (default $"+envDataDir+", else $XDG_DATA_HOME/subactor, else ~/.local/share/subactor); "+memoryData+" keeps them in memory")
	fs.StringVar(&p.store, "store", "", "keep sessions in the PostgreSQL database at `URL` (postgres://...; default $"+envStore+") instead of the data directory, which keeps the agent journal")
}

// configFlag defines -config on fs; what says what the servers are for.
func configFlag(fs *flag.FlagSet, p *string, what string) {
	fs.StringVar(p, "config", "", `a JSON `+"`FILE`"+` of ACP agent servers, {"agent_servers": {"NAME": {"command": ...}}} (see above); `+what)
}

// parseRun parses the flags of run; when ok is false the command ends with
// code (0 after -h).
func parseRun(args []string, stdout, stderr io.Writer) (o options, code int, ok bool) {
	fs := runFlags(&o)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return o, code, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var msg string
	switch {
	case set["continue"] && o.cont == "":
		msg = "-continue needs a session id"
	case o.cont != "" && set["dir"]:
		msg = "-dir cannot be used with -continue: a session surveys the directory it started with"
	case o.cont == "" && fs.NArg() > 0:
		msg = fmt.Sprintf("unexpected argument %q (a prompt is given only with -continue)", fs.Arg(0))
	case o.maxDepth < 0:
		msg = fmt.Sprintf("-max-depth %d must not be negative", o.maxDepth)
	case o.limits.header < 0 || o.limits.idle < 0 || o.limits.call < 0:
		msg = "-header-timeout, -idle-timeout and -call-timeout must not be negative"
	case set["models"] && o.modelsFile == "":
		msg = "-models needs a file"
	case set["config"] && o.config == "":
		msg = "-config needs a file"
	case set["provider"] && !o.cluster:
		msg = "-provider names agent servers on cluster members: give -cluster too"
	}
	if msg != "" {
		fmt.Fprintf(stderr, "%s run: %s\n", prog, msg)
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
	// errSessionComplete is -continue without a prompt on a session whose
	// last run completed: there is nothing to go on with.
	errSessionComplete = errors.New("the session is complete: give a prompt to continue it")
)

// outcome is how a survey's top-level run ended.
type outcome struct {
	session string
	res     subagent.Result // Usage includes the children's
}

// systemPrompt is the top agent's system prompt on a real model: the task
// text alone ("survey DIR") is what the scripted model follows, and a real
// one needs to be told what a survey is. The scripted model ignores it.
const systemPrompt = `You survey a directory tree with read-only file tools. ` +
	`Delegate each sub-folder of the directory to a child agent with the subagent tool ` +
	`(a short description, and a prompt naming the folder's path and asking for its files, lines and bytes, all nested folders included). ` +
	`Count the directory's own top-level files yourself (count takes a directory: one call for all the files directly in it). ` +
	`Answer with one line of totals for the whole tree, then one line per sub-folder and one for the top level.`

// survey wires the models m and runs the top-level agent: a new session on
// "survey <o.dir>", or the session o.cont continued. It writes "session
// <id>" (with -json, a node/session record) to out once the session
// exists, the children's events to rep and warnings to logs. The file
// tools are confined to the directory and name it as the user gave it, so
// the prompt, the children's paths and the answer all say which directory
// was surveyed. It returns the top run's result, whatever its stop reason,
// or an error when the run could not be done. Everything it starts is
// closed before it returns.
func survey(ctx context.Context, o options, m models, out io.Writer, rep reporter, logs io.Writer) (outcome, error) {
	data, err := dataDir(o.data)
	if err != nil {
		return outcome{}, err
	}
	target := surveyed{Name: o.dir}
	if o.cont == "" {
		// Checked before the data directory is touched: a run that
		// cannot start leaves nothing behind.
		if target.Dir, err = readableDir(o.dir); err != nil {
			return outcome{}, err
		}
	}
	// A continued session must exist already: no directory is created
	// for it.
	store, closeStore, err := openStore(ctx, data, o.cont == "")
	if err != nil {
		return outcome{}, err
	}
	defer closeStore()
	store, closeHooks, err := withCrashHooks(store)
	if err != nil {
		return outcome{}, err
	}
	defer closeHooks()
	if o.servers.journal, err = openJournal(data.dir, logs); err != nil {
		return outcome{}, err
	}

	prompt := o.prompt
	if o.cont != "" {
		var turns int
		var complete bool
		if target, turns, complete, err = continued(ctx, store, o.cont); err != nil {
			return outcome{}, fmt.Errorf("-continue %s: %v: %w", o.cont, data, err)
		}
		if complete && prompt == "" {
			return outcome{}, fmt.Errorf("-continue %s: %w", o.cont, errSessionComplete)
		}
		if _, err := readableDir(target.Dir); err != nil {
			return outcome{}, err
		}
		if prompt == "" && turns == 0 {
			// Killed before its prompt was stored: start it now.
			prompt = target.task()
		}
	} else {
		prompt = target.task()
	}
	fsTools, err := fstools.New(target.Dir, fstools.Options{Name: target.Name, VCS: o.vcs})
	if err != nil {
		return outcome{}, fmt.Errorf("cannot read directory %q: %w", target.Name, err)
	}

	// With -cluster, the node's runtime: peers reach the proxies of the
	// runs they host for it there. Stopping the node leaves the cluster.
	var sys *actors.System
	var member *cluster.Node
	if o.cluster {
		if member, err = joinForRun(ctx, o.clusterOpts, o.remote, logs); err != nil {
			return outcome{}, err
		}
		defer member.Stop()
		sys = member.System()
	} else {
		sys = actors.NewSystem(actors.WithLogger(logger(logs)))
		defer sys.Shutdown()
	}
	svc := registry.New(sys)
	defer svc.Close()

	topTools, closeTree, err := delegationTools(svc, nil, sys, store, m, fsTools, o.servers, target.Dir, rep, o.maxDepth)
	if err != nil {
		return outcome{}, err
	}
	defer closeTree()
	if o.cluster {
		remoteTools, closeRemote, err := registerRemote(svc, member, o.remote, store, toolNamesOf(topTools), o.maxDepth)
		if err != nil {
			return outcome{}, err
		}
		defer closeRemote()
		topTools = slices.Concat(topTools, remoteTools)
	}

	// The option caps the tool's depth too: it takes the tighter of both.
	maxDepth := o.maxDepth
	cfg := agent.Config{
		Store:  store,
		Header: subagent.SessionHeader{SessionID: o.cont},
		Resume: o.cont != "",
		Model:  m.top,
		Tools:  topTools,
		// With -models, children inherit the endpoint and model, and
		// their descriptors record them (a resumed child uses those).
		Options: subagent.AgentOptions{MaxDepth: &maxDepth, ModelProvider: m.endpoint, Model: m.name},
	}
	if m.real {
		cfg.System = systemPrompt
	}
	// The top agent's own steps are shown as its children's are: with a
	// real model, a long think or a retried call is not silence.
	cfg.OnStep = func(s agent.Step) {
		rep.top(subagent.RunProgress{RunID: s.Agent, Kind: s.Kind, Step: s.N, Text: s.Text, IsError: s.IsError, Usage: s.Usage})
	}
	if o.cont == "" {
		rec, err := json.Marshal(target)
		if err != nil {
			return outcome{}, err
		}
		cfg.Header.SessionID = ids.New()
		cfg.LogOnly = []persistence.Record{{Kind: kindSurvey, Data: rec}}
	}
	top, err := agent.New(ctx, cfg)
	if err != nil {
		return outcome{}, err
	}
	defer top.Close()
	if err := printSession(out, o.json, top.SessionID()); err != nil {
		return outcome{}, err
	}
	// The view closes after the listener is released (deferred calls run
	// last first), before anything else is printed.
	defer rep.close()
	events := svc.ListenParent(top.SessionID(), rep.event)
	defer events.Release()
	var blocks []subagent.ContentBlock
	if prompt != "" {
		blocks = []subagent.ContentBlock{subagent.Text(prompt)}
	}
	res := top.Run(ctx, blocks, nil)
	// Every child has settled and been disposed; flushing the listener
	// prints their end lines before the answer, also after a cancel.
	if err := events.Flush(context.WithoutCancel(ctx)); err != nil {
		return outcome{}, err
	}
	return outcome{session: top.SessionID(), res: res}, nil
}

// delegationTools registers on svc the spawn provider, whose children
// run on m's models with fsTools and the subagent tool, and a provider
// per agent server of servers, working in dir (their starts shown on
// rep); it returns the top agent's tools: fsTools, the subagent tool and
// a delegate tool per agent server (the ACP agents are the top agent's
// alone). With mgr, the subagent tool can delegate in the background.
// The returned func closes the tools and unregisters the providers.
func delegationTools(svc *registry.Service, mgr *tasks.Manager, sys *actors.System, store persistence.Store, m models, fsTools []agent.Tool, servers agentServers, dir string, rep reporter, maxDepth int) ([]agent.Tool, func(), error) {
	tool := delegate.New(delegate.Config{Service: svc, Provider: spawn.DefaultName, MaxDepth: maxDepth, Store: store, Tasks: mgr})
	tools := append(slices.Clip(fsTools), tool)
	provider, err := spawn.New(spawn.Config{System: sys, Store: store, Model: m.top, Models: m.spawnModels(), Tools: tools})
	var release func()
	if err == nil {
		release, err = svc.RegisterProvider(provider)
	}
	if err != nil {
		tool.Close()
		return nil, nil, err
	}
	closeAll := func() { release(); tool.Close() }
	if len(servers.names) == 0 {
		return tools, closeAll, nil
	}
	agentTools, closeAgents, err := servers.register(svc, sys, store, dir, rep, toolNamesOf(tools), maxDepth)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return slices.Concat(tools, agentTools), func() { closeAgents(); closeAll() }, nil
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

// topLevelOf is the top-level session above id, id itself when it has no
// parent: the one run -continue takes for any of its descendants. A chain
// of parents longer than maxParents (only a damaged store has one) is an
// error.
func topLevelOf(ctx context.Context, store persistence.Store, id string) (string, error) {
	const maxParents = 1024
	for range maxParents {
		h, err := store.Header(ctx, id)
		if err != nil {
			return "", err
		}
		if h.ParentSessionID == "" {
			return id, nil
		}
		id = h.ParentSessionID
	}
	return "", fmt.Errorf("%w: more than %d levels of parents above session %s", persistence.ErrCorrupt, maxParents, id)
}

// continued reads what continuing session id needs from its log: the
// directory it surveys, how many turns it has, and whether its last run
// completed (a completed stop after a final answer). The session must be
// a top-level one that node run started; the errors say which command
// continues the others.
func continued(ctx context.Context, store persistence.Store, id string) (target surveyed, turns int, complete bool, err error) {
	h, recs, err := store.Load(ctx, id)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return target, 0, false, errUnknownSession
	case err != nil:
		return target, 0, false, err
	case h.ParentSessionID != "":
		if _, derr := delegationOf(ctx, store, h.ParentSessionID); derr == nil {
			return target, 0, false, fmt.Errorf("%w: it is the child of the delegate session %s (continue it with %s delegate -continue %s PROMPT)", errNotTopLevel, h.ParentSessionID, prog, h.ParentSessionID)
		}
		top, terr := topLevelOf(ctx, store, h.ParentSessionID)
		if terr != nil {
			return target, 0, false, fmt.Errorf("%w: it is a child of %s: %w", errNotTopLevel, h.ParentSessionID, terr)
		}
		return target, 0, false, fmt.Errorf("%w: it is a child of %s (continue its top-level session with %s run -continue %s)", errNotTopLevel, h.ParentSessionID, prog, top)
	}
	found, delegate := false, false
	var last agent.Message
	for _, r := range recs {
		switch {
		case r.Kind == persistence.KindMessage:
			turns++
			complete, last = false, agent.Message{} // Unmarshal keeps what the JSON leaves out
			if err := json.Unmarshal(r.Data, &last); err != nil {
				return target, 0, false, &persistence.CorruptError{SessionID: id, Part: "record", Err: err}
			}
		case r.Kind == agentlog.KindStop:
			var stop agentlog.Stop
			complete = json.Unmarshal(r.Data, &stop) == nil && stop.StopReason == subagent.Completed &&
				last.Role == agent.Assistant && len(last.ToolCalls) == 0
		case r.Kind == kindDelegate:
			delegate = true
		case r.Kind == kindSurvey && !found:
			// The first one is authoritative, as a descriptor's is.
			if err := json.Unmarshal(r.Data, &target); err != nil || target.Dir == "" || target.Name == "" {
				return target, 0, false, fmt.Errorf("%w: its %s record is malformed", errNotNodeSession, kindSurvey)
			}
			found = true
		}
	}
	switch {
	case delegate:
		return target, 0, false, fmt.Errorf("%w: it is a delegate session (continue its child with %s delegate -continue %s PROMPT)", errNotNodeSession, prog, id)
	case !found:
		return target, 0, false, errNotNodeSession
	}
	return target, turns, complete, nil
}
