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
	"sync"

	"github.com/subactor/subactor/internal/agentlog"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// errNoPrompt is delegate without a prompt.
var errNoPrompt = errors.New("no prompt: give the child's task after the flags")

// delegateOptions are the flags and arguments of delegate.
type delegateOptions struct {
	config   string
	provider string
	dir      string
	data     dataPlace
	json     bool
	quiet    bool
	prompt   string
	cont     string // -continue: the delegate session whose child goes on
	// -cluster: delegate through the cluster (serve.go)
	cluster     bool
	clusterOpts clusterOptions
	// steer, with -cluster: stdin's lines steer the child.
	steer bool
	// features, with -cluster: the child's start-time features.
	features childFeatures
}

// childFeatures are delegate -cluster's start-time features of the child
// (S4): each is passed to the member's provider, which must support it.
type childFeatures struct {
	persona, outputSchema string
	allowTools, denyTools string
	maxDepth              int
	set                   map[string]bool // which flags were given
}

// featureFlags are the flags of childFeatures.
var featureFlags = []string{"persona", "output-schema", "allow-tools", "deny-tools", "max-depth"}

// apply sets the features given on req.
func (f childFeatures) apply(req *subagent.StartRequest) error {
	if f.set["persona"] {
		req.Persona = new(f.persona)
	}
	if f.set["output-schema"] {
		schema := []byte(f.outputSchema)
		if name, ok := strings.CutPrefix(f.outputSchema, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				return configErrorf("-output-schema: %v", err)
			}
			schema = b
		}
		req.OutputSchema = schema
	}
	if f.set["allow-tools"] || f.set["deny-tools"] {
		req.ToolFilter = &subagent.ToolFilter{Allow: splitList(f.allowTools), Deny: splitList(f.denyTools)}
	}
	if f.set["max-depth"] {
		req.MaxDepth = new(f.maxDepth)
	}
	return nil
}

func delegateFlags(o *delegateOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" delegate", flag.ContinueOnError)
	configFlag(fs, &o.config, "required")
	fs.StringVar(&o.provider, "provider", "", "the agent server to delegate to, a `NAME` in the -config file (may be left out when it names one only)")
	fs.StringVar(&o.dir, "dir", ".", "the `DIR` the child works in, unless its server's entry gives \"dir\"")
	dataFlag(fs, &o.data)
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line: the session, every child event, then the result")
	fs.BoolVar(&o.quiet, "quiet", false, "print the session id and the output only, no progress (with -json: the session and result lines)")
	fs.StringVar(&o.cont, "continue", "", "continue the child of the delegate `SESSION` with the prompt, resumed from its log (session/load) on the server it ran on")
	fs.BoolVar(&o.cluster, "cluster", false, "delegate to the agent server -provider on a cluster member that offers it (with -peers or -etcd)")
	clusterFlags(fs, &o.clusterOpts, "127.0.0.1:0")
	fs.StringVar(&o.features.persona, "persona", "", "with -cluster, the child's `PERSONA` (its system prompt's role)")
	fs.StringVar(&o.features.outputSchema, "output-schema", "", "with -cluster, the JSON Schema the child's output must satisfy: the `SCHEMA` itself, or @FILE")
	fs.StringVar(&o.features.allowTools, "allow-tools", "", "with -cluster, the only `TOOLS` (name,...) the child may use")
	fs.StringVar(&o.features.denyTools, "deny-tools", "", "with -cluster, `TOOLS` (name,...) the child may not use")
	fs.IntVar(&o.features.maxDepth, "max-depth", 0, "with -cluster, the deepest delegation `LEVEL` below the child")
	fs.BoolVar(&o.steer, "steer", false, "with -cluster, steer the child with each line read from stdin while it runs (a child on a member's -offer-model takes steers); each is answered on stderr, \"steer admitted\" or why not")
	return fs
}

// parseDelegate parses the flags of delegate; when ok is false the command
// ends with code (0 after -h).
func parseDelegate(args []string, stdout, stderr io.Writer) (o delegateOptions, code int, ok bool) {
	fs := delegateFlags(&o)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return o, code, false
	}
	o.prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	o.features.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(featureFlags, f.Name) {
			o.features.set[f.Name] = true
		}
	})
	if o.cluster && o.config != "" {
		// The file's "cluster" object gives the cluster flags not given.
		if _, _, err := applyClusterKeys(fs, o.config, &o.clusterOpts); err != nil {
			return o, failed(stderr, "delegate", err), false
		}
	}
	var msg string
	switch {
	case o.config == "" && !o.cluster:
		msg = `-config FILE is required: it names the agent servers, {"agent_servers": {"NAME": {"command": ...}}}`
	case o.prompt == "":
		msg = errNoPrompt.Error()
	case o.dir == "":
		msg = "-dir needs a directory"
	case o.steer && !o.cluster:
		msg = "-steer steers a child on a cluster member: give -cluster too"
	case len(o.features.set) > 0 && !o.cluster:
		// A local delegate's child is an ACP agent, which takes none.
		msg = "-persona, -output-schema, -allow-tools, -deny-tools and -max-depth shape a child on a cluster member (whose provider supports them): give -cluster too"
	}
	if msg != "" {
		fmt.Fprintf(stderr, "%s delegate: %s\n", prog, msg)
		return o, exitUsage, false
	}
	return o, exitOK, true
}

// delegateCommand runs the delegate subcommand: the parent's session id,
// the child's progress, a blank line and its output on stdout (with
// -json, one JSON object per line), errors and the stop reason of a child
// that did not complete on stderr. It exits 0 only when the child
// completed.
func delegateCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseDelegate(args, stdout, stderr)
	if !ok {
		return code
	}
	if o.cluster {
		return clusterDelegate(ctx, o, stdout, stderr)
	}
	if o.cont != "" {
		// The session says which server and directory.
		return continueCommand(ctx, o, stdout, stderr)
	}
	servers, err := loadAgentServers(o.config)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	name, err := servers.pick(o.provider)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	dir := servers.cfgs[name].Dir
	if dir == "" {
		// Checked before the data directory is touched, as run does.
		if dir, err = enterableDir(o.dir); err != nil {
			return failed(stderr, "delegate", err)
		}
	}
	if w := shadowWarning(); w != "" {
		fmt.Fprintf(stderr, "%s delegate: %s\n", prog, w)
	}
	out, err := delegateOnce(ctx, o, servers, name, dir, stdout, newReporter(o.quiet, o.json, stdout, stderr), stderr)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	return reportChild("delegate", out, o.json, o.quiet, stdout, stderr)
}

// reportChild prints how a child's activation ended, after its progress:
// its usage, a blank line and its output (with json, the result line),
// and on stderr the stop reason of a child that did not complete. It
// returns the exit code: 0 only when the child completed.
func reportChild(command string, out outcome, asJSON, quiet bool, stdout, stderr io.Writer) int {
	res := out.res
	answer := subagent.TextOf(res.Output)
	if asJSON {
		r := jsonResult{Type: typeResult, SessionID: out.session, StopReason: string(res.StopReason), Detail: res.Detail, Answer: answer, Usage: res.Usage}
		if err := newEncoder(stdout).Encode(r); err != nil {
			fmt.Fprintf(stderr, "%s %s: %v\n", prog, command, err)
			return exitCode(err)
		}
	} else {
		if res.Usage != nil && !quiet {
			fmt.Fprintln(stderr, usageLine(*res.Usage))
		}
		// The output comes whatever the stop reason (a refusal's words are
		// worth reading too); a killed child's task keeps none (its end
		// event has its last words).
		if answer != "" || res.StopReason == subagent.Completed {
			if !quiet {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintln(stdout, clean(answer))
		}
	}
	if res.StopReason != subagent.Completed {
		fmt.Fprintf(stderr, "%s %s: the child ended %s: %s\n", prog, command, res.StopReason, clean(res.Detail))
		return exitFailed
	}
	return exitOK
}

// enterableDir returns dir's absolute path, or an error naming dir if it
// is no directory.
func enterableDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		var info os.FileInfo
		if info, err = os.Stat(abs); err == nil && !info.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return "", fmt.Errorf("cannot use directory %q: %w", dir, err)
	}
	return abs, nil
}

// kindDelegate marks the log-only record a delegate command's parent
// session starts with: what it delegated, so that the session can be
// listed with its prompt.
const kindDelegate = "node/delegate"

// delegated is the data of a kindDelegate record.
type delegated struct {
	Provider string `json:"provider"`
	Dir      string `json:"dir"`
	Prompt   string `json:"prompt"`
}

// delegateOnce runs one child on server name through a Service: its
// parent is a top-level agent made for it, with a session of its own in
// the data directory (so that `sessions` lists it with its child, whose
// session keeps the agent's session id), and it works in dir unless the
// server's entry gives one. It writes "session <id>" (a node/session
// record with -json) to out once the parent exists, the child's events to
// rep and warnings to logs, and returns the child's result, whatever its
// stop reason, or an error when no child could be started. The parent's
// log ends with an agent/stop record of that result. Everything it starts
// is closed before it returns.
func delegateOnce(ctx context.Context, o delegateOptions, servers agentServers, name, dir string, out io.Writer, rep reporter, logs io.Writer) (outcome, error) {
	data, err := dataDir(o.data)
	if err != nil {
		return outcome{}, err
	}
	store, closeStore, err := openStore(ctx, data, true)
	if err != nil {
		return outcome{}, err
	}
	defer closeStore()
	svc, mgr, closeAll, err := continuables(store, data.dir, servers, name, dir, logs, rep)
	if err != nil {
		return outcome{}, err
	}
	defer closeAll()

	parent, err := standInParent(ctx, store, kindDelegate, delegated{Provider: name, Dir: dir, Prompt: o.prompt}, subagent.AgentOptions{})
	if err != nil {
		return outcome{}, err
	}
	closeParent := sync.OnceFunc(parent.Close)
	defer closeParent()
	if err := printSession(out, o.json, parent.SessionID()); err != nil {
		return outcome{}, err
	}
	defer rep.close()
	events := svc.ListenParent(parent.SessionID(), rep.event)
	defer events.Release()

	res, runErr := runChild(ctx, svc, mgr, name, parent, o.prompt)
	// The run has ended and been disposed: flushing prints its end line
	// before the output, also after a cancel.
	if err := events.Flush(context.WithoutCancel(ctx)); err != nil {
		return outcome{}, err
	}
	closeParent()
	if err := recordStop(ctx, store, parent.SessionID(), res, runErr); err != nil {
		return outcome{}, err
	}
	return outcome{session: parent.SessionID(), res: res}, nil
}

// recordStop ends a stand-in parent's log with an agent/stop record of
// its child's result res, or of runErr when no result came; it returns
// runErr, or why the record was not stored.
func recordStop(ctx context.Context, store persistence.Store, session string, res subagent.Result, runErr error) error {
	stop := agentlog.Stop{StopReason: res.StopReason, Detail: res.Detail, Usage: res.Usage}
	if runErr != nil {
		stop = agentlog.Stop{StopReason: subagent.Error, Detail: runErr.Error()}
	}
	stopData, err := json.Marshal(stop)
	if err == nil {
		err = store.Append(context.WithoutCancel(ctx), session, persistence.Record{Kind: agentlog.KindStop, Data: stopData})
	}
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return fmt.Errorf("the child ended %s, but its parent's stop record was not stored: %w", res.StopReason, err)
	}
	return nil
}

// continuables is a Service that runs continuable children of the agent
// server name, working in dir, as tasks recorded in store, its starts
// shown on rep; the returned func closes it all, killing what still runs.
// Its agents are recorded in the journal of the data directory data,
// which first ends what a killed node left there (K4).
func continuables(store persistence.Store, data string, servers agentServers, name, dir string, logs io.Writer, rep reporter) (*registry.Service, *tasks.Manager, func(), error) {
	journal, err := openJournal(data, logs)
	if err != nil {
		return nil, nil, nil, err
	}
	servers.journal = journal
	sys := actors.NewSystem(actors.WithLogger(logger(logs)))
	taskStore, _ := store.(persistence.TaskStore) // both stores keep tasks
	mgr := tasks.New(sys, taskStore)
	svc := registry.New(sys, registry.WithTasks(mgr))
	stop := func() {
		svc.Close()
		_ = mgr.Close(context.Background())
		sys.Shutdown()
	}
	provider, err := servers.provider(name, sys, store, dir, rep)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	release, err := svc.RegisterProvider(provider)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return svc, mgr, func() { release(); stop() }, nil
}

// runChild starts the child as a continuable one of parent (so that
// `send` can follow it up later) and waits for its activation's task.
// ctx is the run's cancellation (SIGINT): once it ends the task is
// killed, and its result (aborted) awaited; cancelled while the agent
// starts, the child ends aborted too, without a result of its own.
func runChild(ctx context.Context, svc *registry.Service, mgr *tasks.Manager, name string, parent subagent.Agent, prompt string) (subagent.Result, error) {
	c, err := svc.StartContinuable(ctx, name, subagent.StartRequest{
		Parent: parent,
		Prompt: []subagent.ContentBlock{subagent.Text(prompt)},
	})
	if err != nil && ctx.Err() != nil {
		return subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled while the agent was starting"}, nil
	}
	if err != nil {
		return subagent.Result{}, err
	}
	return awaitTask(ctx, mgr, parent.SessionID(), c.Task.ID)
}

// awaitTask waits for a task of parentID to end and returns its run's
// result; if ctx ends first the task is killed and its end awaited. A
// task that failed with an infrastructure fault is an error.
func awaitTask(ctx context.Context, mgr *tasks.Manager, parentID, taskID string) (subagent.Result, error) {
	t, err := mgr.Await(ctx, parentID, taskID)
	if ctx.Err() != nil {
		if _, err := mgr.Kill(context.WithoutCancel(ctx), parentID, taskID); err != nil {
			return subagent.Result{}, err
		}
		t, err = mgr.Await(context.WithoutCancel(ctx), parentID, taskID)
	}
	switch {
	case err != nil:
		return subagent.Result{}, err
	case t.Result == nil:
		return subagent.Result{}, fmt.Errorf("task %s ended %s without a result", taskID, t.State)
	case t.State == tasks.Failed && t.Err != "":
		return *t.Result, errors.New(t.Err)
	}
	return *t.Result, nil
}
