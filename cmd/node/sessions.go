package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// stateInterrupted is the state of a session whose log has no stop record
// after its last turn: a run is still going, or its process died.
const stateInterrupted = "running/interrupted"

// stateUnreadable is the state of a session whose log does not load.
const stateUnreadable = "unreadable"

func sessionsFlags(data *dataPlace, asJSON *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" sessions", flag.ContinueOnError)
	dataFlag(fs, data)
	fs.BoolVar(asJSON, "json", false, "print one JSON object per session instead of a line, its depth below SESSION beside it")
	return fs
}

// sessionsCommand runs the sessions subcommand: one line per session on
// stdout (see sessionLine), errors on stderr. It only reads: the store is
// opened read-only, and a missing data directory or store file has no
// sessions and is not created. While a node runs on the directory (its
// lock keeps readers out of the file), that node lists its sessions.
func sessionsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var flags dataPlace
	var req sessionsRequest
	fs := sessionsFlags(&flags, &req.JSON)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "%s sessions: unexpected argument %q (one session id at most)\n", prog, fs.Arg(1))
		return exitUsage
	}
	data, err := dataDir(flags)
	if err != nil {
		fmt.Fprintf(stderr, "%s sessions: %v\n", prog, err)
		return exitCode(err)
	}
	if data.dir == memoryData {
		fmt.Fprintf(stderr, "%s sessions: -data %s keeps no sessions past its own process: nothing to list\n", prog, memoryData)
		return exitUsage
	}
	req.Session = fs.Arg(0)
	store, closeStore, err := openReader(ctx, data)
	if errors.Is(err, errDataDirLocked) {
		if reply, ok := askLiveNode(ctx, data.dir, req); ok {
			io.WriteString(stdout, reply.Stdout)
			io.WriteString(stderr, reply.Stderr)
			return reply.Code
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s sessions: %v\n", prog, err)
		return exitFailed
	}
	defer closeStore()
	return listSessions(ctx, store, data, req, stdout, stderr)
}

// listSessions prints the top-level sessions of store, or req.Session and
// its children, as node sessions does, and returns its exit code.
func listSessions(ctx context.Context, store persistence.Store, data dataPlace, req sessionsRequest, stdout, stderr io.Writer) int {
	l := &lister{ctx: ctx, store: store, w: stdout, errs: stderr, seen: map[string]bool{}, json: req.JSON}
	session := req.Session
	var err error
	if session == "" {
		err = l.topLevel()
	} else {
		err = l.tree(session)
		err = unknownSession(err, session, data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s sessions: %v\n", prog, err)
		return exitFailed
	}
	if l.unreadable {
		return exitFailed
	}
	return exitOK
}

// unknownSession is err, or, when err says the store has no session id,
// the error every command gives for an unknown session.
func unknownSession(err error, id string, data dataPlace) error {
	if errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("%w %q in %v", errUnknownSession, id, data)
	}
	return err
}

// lister prints session lines.
type lister struct {
	ctx   context.Context
	store persistence.Store
	w     io.Writer
	errs  io.Writer
	// seen guards the tree against a store whose parent links loop.
	seen map[string]bool
	// unreadable is set once a log did not load; its line says so and
	// the error went to errs.
	unreadable bool
	json       bool // one jsonSession a line
}

// jsonSession is a session as sessions -json prints it.
type jsonSession struct {
	ID           string `json:"id"`
	Depth        int    `json:"depth"`
	Turns        int    `json:"turns"`
	State        string `json:"state"`
	Server       string `json:"server,omitempty"`
	AgentSession string `json:"agentSession,omitempty"`
	Prompt       string `json:"prompt"`
}

// topLevel prints a line for every session without a parent, in creation
// order.
func (l *lister) topLevel() error {
	infos, err := l.store.Sessions(l.ctx)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if info.Header.ParentSessionID == "" {
			l.line(info.Header.SessionID, 0)
		}
	}
	return nil
}

// tree prints id's line, then its children's trees indented one level
// further, each level in creation order.
func (l *lister) tree(id string) error {
	if _, err := l.store.Header(l.ctx, id); err != nil {
		return err
	}
	return l.subtree(id, 0)
}

func (l *lister) subtree(id string, depth int) error {
	l.seen[id] = true
	l.line(id, depth)
	children, err := l.store.Children(l.ctx, id)
	if err != nil {
		return err
	}
	for _, c := range children {
		if l.seen[c.Header.SessionID] {
			continue
		}
		if err := l.subtree(c.Header.SessionID, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// line prints one session:
//
//	<indent><id> turns=<n> state=<state> prompt=<quoted first line of the first prompt>
//
// indented by two spaces per depth; a child on an ACP agent server says
// which, and the agent's own session id, before its prompt
// (server=<name> agent-session=<id>). A log that does not load is listed
// with state unreadable and its error goes to errs.
func (l *lister) line(id string, depth int) {
	s, err := summarize(l.ctx, l.store, id)
	if err != nil {
		l.unreadable = true
		fmt.Fprintf(l.errs, "%s sessions: %v\n", prog, err)
		s = summary{state: stateUnreadable}
	}
	if l.json {
		_ = newEncoder(l.w).Encode(jsonSession{ID: id, Depth: depth, Turns: s.turns, State: s.state, Server: s.server, AgentSession: s.agentSession, Prompt: s.prompt})
		return
	}
	agentPart := ""
	if s.server != "" {
		agentPart = fmt.Sprintf(" server=%s agent-session=%s", s.server, s.agentSession)
	}
	fmt.Fprintf(l.w, "%s%s turns=%d state=%s%s prompt=%q\n", strings.Repeat("  ", depth), id, s.turns, s.state, agentPart, s.prompt)
}

// summary is what a session line says about a log.
type summary struct {
	turns  int    // message records
	state  string // the last stop reason, or stateInterrupted
	prompt string // the first line of the first user turn
	// server and agentSession name an ACP child's agent server and the
	// agent's own session, from its descriptor.
	server, agentSession string
}

// summarize reads a session's log. The state is the stop reason of its last
// agentlog.KindStop record when no turn follows it: every activation's log
// ends with one, so a log without it after its last turn belongs to a run
// that is still going or whose process died.
func summarize(ctx context.Context, store persistence.Store, id string) (summary, error) {
	_, recs, err := store.Load(ctx, id)
	if err != nil {
		return summary{}, err
	}
	s := summary{state: stateInterrupted}
	prompted := false
	for _, r := range recs {
		switch r.Kind {
		case persistence.KindMessage:
			s.turns++
			s.state = stateInterrupted
			var m agent.Message
			if !prompted && json.Unmarshal(r.Data, &m) == nil && m.Role == agent.User {
				s.prompt, _, _ = strings.Cut(subagent.TextOf(m.Content), "\n")
				prompted = true
			}
		case kindDelegate:
			// A delegate command's parent has no turns: its prompt is
			// the one it delegated.
			var d delegated
			if !prompted && json.Unmarshal(r.Data, &d) == nil {
				s.prompt, _, _ = strings.Cut(d.Prompt, "\n")
				prompted = true
			}
		case descriptor.Kind:
			if d, err := descriptor.Parse(r.Data); err == nil && s.server == "" && len(d.ProviderData) > 0 {
				if pd, err := acpdata.ParseProviderData(d.ProviderData); err == nil {
					s.server, s.agentSession = d.Provider, pd.SessionID
				}
			}
		case agentlog.KindActivation:
			// A new activation took the log: running until its stop.
			s.state = stateInterrupted
		case agentlog.KindStop:
			var stop agentlog.Stop
			if json.Unmarshal(r.Data, &stop) != nil || stop.StopReason == "" {
				s.state = "unknown"
				continue
			}
			s.state = string(stop.StopReason)
			if len(stop.Output) > 0 {
				s.turns++ // an ACP child's answer: its turns are the agent's
			}
		}
	}
	return s, nil
}
