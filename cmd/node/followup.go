package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// errNotDelegateSession is a send to a session that node delegate did not
// make: only those record which agent server their child runs on.
var errNotDelegateSession = errors.New("not a session of node delegate (follow-ups go to the child of a delegate session; see sessions)")

// sendOptions are the flags and arguments of send.
type sendOptions struct {
	config                  string
	data                    dataPlace
	json, quiet             bool
	session, child, message string
}

func sendFlags(o *sendOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" send", flag.ContinueOnError)
	configFlag(fs, &o.config, "required: the agent servers, the child's among them")
	dataFlag(fs, &o.data)
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line: the session, every child event, then the result")
	fs.BoolVar(&o.quiet, "quiet", false, "print the session id and the output only, no progress (with -json: the session and result lines)")
	return fs
}

// sendCommand runs the send subcommand: a follow-up to the continuable
// child CHILD of the delegate session SESSION (S8), which resumes it from
// its log (ACP session/load); the output is delegate's.
func sendCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o sendOptions
	fs := sendFlags(&o)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	o.message = strings.TrimSpace(strings.Join(fs.Args()[min(2, fs.NArg()):], " "))
	var msg string
	switch {
	case o.config == "":
		msg = `-config FILE is required: it names the agent servers, {"agent_servers": {"NAME": {"command": ...}}}`
	case fs.NArg() < 3 || o.message == "":
		msg = "give the session, the child and the message after the flags: send SESSION CHILD MESSAGE..."
	}
	if msg != "" {
		fmt.Fprintf(stderr, "%s send: %s\n", prog, msg)
		return exitUsage
	}
	o.session, o.child = fs.Arg(0), fs.Arg(1)
	out, err := sendOnce(ctx, o, stdout, newReporter(o.quiet, o.json, stdout, stderr), stderr)
	if err != nil {
		return failed(stderr, "send", err)
	}
	return reportChild("send", out, o.json, o.quiet, stdout, stderr)
}

// sendOnce delivers the follow-up through a Service of the child's agent
// server, as its delegate session recorded it, and waits for the
// activation it started.
func sendOnce(ctx context.Context, o sendOptions, out io.Writer, rep reporter, logs io.Writer) (outcome, error) {
	servers, err := loadAgentServers(o.config)
	if err != nil {
		return outcome{}, err
	}
	data, err := dataDir(o.data)
	if err != nil {
		return outcome{}, err
	}
	if data.dir == memoryData {
		return outcome{}, fmt.Errorf("-data %s keeps no sessions past its own process: nothing to follow up", memoryData)
	}
	store, closeStore, err := openStore(ctx, data, false)
	if err != nil {
		return outcome{}, err
	}
	defer closeStore()
	d, err := delegationOf(ctx, store, o.session)
	if err != nil {
		return outcome{}, err
	}
	name, err := servers.pick(d.Provider)
	if err != nil {
		return outcome{}, err
	}
	dir := servers.cfgs[name].Dir
	if dir == "" {
		dir = d.Dir
	}
	svc, mgr, closeAll, err := continuables(store, data.dir, servers, name, dir, logs, rep)
	if err != nil {
		return outcome{}, err
	}
	defer closeAll()
	h, err := store.Header(ctx, o.session)
	if err != nil {
		return outcome{}, err
	}
	parent := owner{h}
	if err := printSession(out, o.json, o.session); err != nil {
		return outcome{}, err
	}
	defer rep.close()
	events := svc.ListenParent(o.session, rep.event)
	defer events.Release()
	sent, err := svc.SendMessage(ctx, parent, o.child, []subagent.ContentBlock{subagent.Text(o.message)}, "user")
	if errors.Is(err, registry.ErrNotContinuable) {
		return outcome{}, fmt.Errorf("%q is not a child of session %q that takes follow-ups (see sessions %s)", o.child, o.session, o.session)
	}
	if err != nil {
		return outcome{}, err
	}
	res, err := awaitTask(ctx, mgr, o.session, sent.Task.ID)
	if ferr := events.Flush(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	return outcome{session: o.session, res: res}, err
}

// owner is a delegate session as the parent of its child's follow-ups: it
// runs no turn and writes nothing to its own log; its session id makes it
// the child's owner.
type owner struct{ h subagent.SessionHeader }

func (o owner) ID() string                     { return o.h.SessionID }
func (o owner) SessionID() string              { return o.h.SessionID }
func (o owner) Header() subagent.SessionHeader { return o.h }
func (o owner) Options() subagent.AgentOptions { return subagent.AgentOptions{} }

// continueCommand runs delegate -continue: the follow-up o.prompt to the
// child of the delegate session o.cont, as send sends it.
func continueCommand(ctx context.Context, o delegateOptions, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s delegate: -continue %s: %v\n", prog, o.cont, err)
		return exitCode(err)
	}
	data, err := dataDir(o.data)
	if err != nil {
		return fail(err)
	}
	child, err := onlyChild(ctx, data, o.cont)
	if err != nil {
		return fail(err)
	}
	s := sendOptions{config: o.config, data: o.data, json: o.json, quiet: o.quiet, session: o.cont, child: child, message: o.prompt}
	out, err := sendOnce(ctx, s, stdout, newReporter(o.quiet, o.json, stdout, stderr), stderr)
	if err != nil {
		return fail(err)
	}
	return reportChild("delegate", out, o.json, o.quiet, stdout, stderr)
}

// onlyChild is the child of the delegate session id, read without
// keeping the store open.
func onlyChild(ctx context.Context, data dataPlace, id string) (string, error) {
	if data.dir == memoryData {
		return "", fmt.Errorf("-data %s keeps no sessions past its own process: nothing to continue", memoryData)
	}
	store, closeStore, err := openReader(ctx, data)
	if err != nil {
		return "", err
	}
	defer closeStore()
	if _, err := delegationOf(ctx, store, id); err != nil {
		return "", err
	}
	kids, err := store.Children(ctx, id)
	switch {
	case err != nil:
		return "", err
	case len(kids) != 1:
		return "", fmt.Errorf("session %q has %d children, not one: follow one up with %s send", id, len(kids), prog)
	}
	return kids[0].Header.SessionID, nil
}

// delegationOf is what the delegate session id recorded: its agent server
// and directory.
func delegationOf(ctx context.Context, store persistence.Store, id string) (delegated, error) {
	_, recs, err := store.Load(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return delegated{}, fmt.Errorf("%w %q", errUnknownSession, id)
	}
	if err != nil {
		return delegated{}, err
	}
	for _, r := range recs {
		if r.Kind == kindDelegate {
			var d delegated
			if err := json.Unmarshal(r.Data, &d); err != nil {
				return delegated{}, &persistence.CorruptError{SessionID: id, Part: "record", Err: err}
			}
			return d, nil
		}
	}
	return delegated{}, fmt.Errorf("session %q: %w", id, errNotDelegateSession)
}

func tasksFlags(data *dataPlace, asJSON *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" tasks", flag.ContinueOnError)
	dataFlag(fs, data)
	fs.BoolVar(asJSON, "json", false, "print one JSON object per task instead of a line")
	return fs
}

// tasksCommand runs the tasks subcommand: the tasks of SESSION, oldest
// first, one per line (see taskLine; with -json, one jsonTask object a
// line); a task whose node process ended before it settled reads
// interrupted. An unknown SESSION fails as sessions fails on it.
func tasksCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var flags dataPlace
	var asJSON bool
	fs := tasksFlags(&flags, &asJSON)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "%s tasks: give one session id\n", prog)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s tasks: %v\n", prog, err)
		return exitFailed
	}
	data, err := dataDir(flags)
	if err != nil {
		return fail(err)
	}
	if data.dir == memoryData {
		fmt.Fprintf(stderr, "%s tasks: -data %s keeps no tasks past its own process: nothing to list\n", prog, memoryData)
		return exitUsage
	}
	// It only reads, as sessions does.
	store, closeStore, err := openReader(ctx, data)
	if err != nil {
		return fail(err)
	}
	defer closeStore()
	session := fs.Arg(0)
	if _, err := store.Header(ctx, session); err != nil {
		return fail(unknownSession(err, session, data))
	}
	taskStore, _ := store.(persistence.TaskStore)
	sys := actors.NewSystem()
	defer sys.Shutdown()
	mgr := tasks.New(sys, taskStore)
	defer mgr.Close(context.Background())
	list, err := mgr.List(ctx, session)
	if err != nil {
		return fail(err)
	}
	enc := newEncoder(stdout)
	for _, t := range list {
		if asJSON {
			err = enc.Encode(jsonTaskOf(t))
		} else {
			_, err = fmt.Fprintln(stdout, taskLine(t))
		}
		if err != nil {
			return fail(err)
		}
	}
	return exitOK
}

// jsonTask is a task as tasks -json prints it.
type jsonTask struct {
	ID          string          `json:"id"`
	Child       string          `json:"child"`
	Provider    string          `json:"provider"`
	State       tasks.State     `json:"state"`
	Continuable bool            `json:"continuable,omitempty"`
	StopReason  string          `json:"stopReason,omitempty"`
	Detail      string          `json:"detail,omitempty"`
	Usage       *subagent.Usage `json:"usage,omitempty"`
}

func jsonTaskOf(t tasks.Task) jsonTask {
	j := jsonTask{ID: t.ID, Child: t.SessionID, Provider: t.Provider, State: t.State, Continuable: t.Continuable, Detail: taskDetail(t)}
	if t.Result != nil {
		j.StopReason, j.Usage = string(t.Result.StopReason), t.Result.Usage
	}
	return j
}

// taskLine is "<task id> child=<session> provider=<name> state=<state>",
// then " continuable" for an activation of a continuable child, then
// " detail=<quoted>" for a task that did not complete.
func taskLine(t tasks.Task) string {
	line := fmt.Sprintf("%s child=%s provider=%s state=%s", t.ID, t.SessionID, t.Provider, t.State)
	if t.Continuable {
		line += " continuable"
	}
	if detail := taskDetail(t); detail != "" {
		line += " detail=" + strconv.Quote(detail) // escapes what a terminal would act on
	}
	return line
}

// taskDetail is why t did not complete, if it says.
func taskDetail(t tasks.Task) string {
	if t.Err == "" && t.Result != nil && t.State != tasks.Completed {
		return t.Result.Detail
	}
	return t.Err
}
