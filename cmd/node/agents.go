package main

// ACP agents in the node: the -config file that names them (the
// agent_servers shape editors use), the providers and delegate tools made
// from it, and the guards against this binary standing in for Node.js.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentproc"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// prog is the name the node was invoked by, which its help and errors
// use: built as subactor (so as not to shadow Node.js), it says so. main
// sets it; tests that call cli in process see "node".
var prog = "node"

// configError is a -config file the node cannot use: exit 2, like a bad
// model configuration.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// agentServers are the ACP agent servers of a -config file.
type agentServers struct {
	path  string
	cfgs  map[string]acp.Config // by server name, as acp.ParseConfigFile made them
	names []string              // sorted
	// journal records their agent processes (see openJournal); nil with
	// an in-memory data directory.
	journal *agentproc.Journal
	// relay, in a node acp session, sends what their children ask of
	// their client to the editor (acprelay.go).
	relay *editorRelay
}

// journalDir is the directory of the data directory where the node
// records the agent processes it runs (see agentproc.Journal).
const journalDir = "agents"

// openJournal opens the agent journal of the data directory data, which
// first ends whatever processes of agents an earlier node on it left
// running when it died (logging what it ended to logs). The caller holds
// the data directory's store: no other node uses the journal. An
// in-memory data directory has none.
func openJournal(data string, logs io.Writer) (*agentproc.Journal, error) {
	if data == memoryData {
		return nil, nil
	}
	j, err := agentproc.OpenJournal(filepath.Join(data, journalDir), logger(logs))
	if err != nil {
		return nil, &dataDirError{Dir: data, Err: err}
	}
	return j, nil
}

// loadAgentServers reads a -config file: {"agent_servers": {"NAME":
// {"command", "args", "env", "dir", "permissions", "read_files",
// "write_files"}}}, strictly (see acp.ParseConfigFile). A command that is
// a relative path (one with a slash) is taken relative to the file's
// directory, so that it means the same from any working directory. A file
// that cannot be read is an error; one that is not a regular file of a
// configuration's size (see readConfigFile) or says something wrong is a
// *configError, and so is a file naming no agent server.
func loadAgentServers(path string) (agentServers, error) {
	s, err := readAgentServers(path)
	if err == nil && len(s.names) == 0 {
		return agentServers{}, configErrorf(`-config %s: no agent servers: give {"agent_servers": {"NAME": {"command": "...", "args": [...]}}}`, path)
	}
	return s, err
}

// readAgentServers is loadAgentServers for a file that may name none
// (serve's, offering its model only).
func readAgentServers(path string) (agentServers, error) {
	data, err := readConfigFile("-config", path, configErrorf)
	if err != nil {
		return agentServers{}, err
	}
	cfgs, err := acp.ParseConfigFile(data)
	if err != nil {
		return agentServers{}, configErrorf("-config %s: %v", path, err)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return agentServers{}, fmt.Errorf("-config: %w", err)
	}
	s := agentServers{path: path, cfgs: cfgs, names: slices.Sorted(maps.Keys(cfgs))}
	for _, name := range s.names {
		c := cfgs[name]
		if !strings.ContainsRune(c.Command, '/') {
			continue
		}
		if !filepath.IsAbs(c.Command) {
			c.Command = filepath.Join(base, c.Command)
			cfgs[name] = c
		}
		// exec would say only "permission denied".
		if fi, err := os.Stat(c.Command); err == nil && fi.IsDir() {
			return agentServers{}, configErrorf("-config %s: agent server %q: command %s is a directory, not a program", path, name, c.Command)
		}
	}
	return s, nil
}

// pick returns the server delegate runs on: name, or the only one when
// name is empty.
func (s agentServers) pick(name string) (string, error) {
	configured := strings.Join(s.names, ", ")
	switch {
	case name == "" && len(s.names) == 1:
		return s.names[0], nil
	case name == "":
		return "", configErrorf("-config %s has %d agent servers: name one with -provider (configured: %s)", s.path, len(s.names), configured)
	}
	if _, ok := s.cfgs[name]; !ok {
		return "", configErrorf("-provider %q is no agent server of %s (configured: %s)", name, s.path, configured)
	}
	return name, nil
}

// checkBesideSpawn refuses a server named like the provider of node run's
// own children: both register on one Service, by name.
func (s agentServers) checkBesideSpawn() error {
	if _, ok := s.cfgs[spawn.DefaultName]; ok {
		return configErrorf("-config %s: agent server %q has the name of the node's own provider of children: rename it", s.path, spawn.DefaultName)
	}
	return nil
}

// provider makes server name's provider: its children run on sys, in dir
// unless the server's entry gives one, their descriptors (the agent's
// session id) go to store, and rep shows their starts.
func (s agentServers) provider(name string, sys *actors.System, store persistence.Store, dir string, rep reporter) (startShown, error) {
	c := s.cfgs[name]
	c.System, c.Store, c.Journal = sys, store, s.journal
	if c.Dir == "" {
		c.Dir = dir
	}
	if s.relay != nil {
		s.relay.apply(&c)
	}
	p, err := acp.New(c)
	if err != nil {
		return startShown{}, fmt.Errorf("agent server %q: %w", name, err)
	}
	return startShown{Provider: p, rep: rep}, nil
}

// startShown is an agent server's provider whose starts the reporter
// shows as they happen: an agent may take most of a minute to start, and
// its child's events come only once it has. A start that fails is shown
// ended, aborted when the run was cancelled (Ctrl-C) meanwhile.
type startShown struct {
	subagent.Provider // an ACP provider, also a subagent.Resumer
	rep               reporter
}

// OutOfProcess passes the ACP provider's on: its children's run spans
// are CLIENT spans (otelx.OutOfProcess).
func (p startShown) OutOfProcess() bool {
	o, ok := p.Provider.(otelx.OutOfProcess)
	return ok && o.OutOfProcess()
}

// Start implements subagent.Provider.
func (p startShown) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	return p.shown(ctx, scope, req, p.Provider.Start)
}

// Resume implements subagent.Resumer.
func (p startShown) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	return p.shown(ctx, scope, req, p.Provider.(subagent.Resumer).Resume)
}

// shown shows start(ctx, scope, req) on the reporter until it returns, and then
// how it ended: "" when the child exists, aborted when ctx (the run's) was
// cancelled, error otherwise.
func (p startShown) shown(ctx context.Context, scope subagent.Scope, req subagent.StartRequest, start func(context.Context, subagent.Scope, subagent.StartRequest) (subagent.Run, error)) (subagent.Run, error) {
	done := p.rep.starting(scope.RunID, p.Name())
	r, err := start(ctx, scope, req)
	switch {
	case err == nil:
		done("")
	case ctx.Err() != nil:
		done(subagent.Aborted)
	default:
		done(subagent.Error)
	}
	return r, err
}

// register registers every server's provider on svc (see provider) and
// returns a delegate tool per server (see offerTools), named by
// agentToolNames beside the tool names taken.
func (s agentServers) register(svc *registry.Service, sys *actors.System, store persistence.Store, dir string, rep reporter, taken []string, maxDepth int) ([]agent.Tool, func(), error) {
	names, err := agentToolNames(s.names, taken)
	if err != nil {
		return nil, nil, configErrorf("-config %s: %v", s.path, err)
	}
	return offerTools(svc, s.names, names, store, maxDepth, "", func(server string) (subagent.Provider, error) {
		return s.provider(server, sys, store, dir, rep)
	})
}

// offerTools registers on svc the provider newProvider makes of each of
// providers, agents of ACP agent servers, and returns a delegate tool per
// provider, named names[its name], capped at maxDepth like the subagent
// tool; where says where its agents run ("" for this machine). The
// returned function closes the tools and unregisters the providers.
func offerTools(svc *registry.Service, providers []string, names map[string]string, store persistence.Store, maxDepth int, where string, newProvider func(string) (subagent.Provider, error)) ([]agent.Tool, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var tools []agent.Tool
	for _, name := range providers {
		p, err := newProvider(name)
		var release func()
		if err == nil {
			release, err = svc.RegisterProvider(p)
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		t := delegate.New(delegate.Config{Service: svc, Provider: p.Name(), Name: names[p.Name()], MaxDepth: maxDepth, Store: store})
		closers = append(closers, release, t.Close)
		tools = append(tools, agentTool{Tool: t, server: p.Name(), where: where})
	}
	return tools, closeAll, nil
}

// agentTool is the delegate tool of one agent server, described as such:
// the model tells it from the subagent tool by name and description.
type agentTool struct {
	*delegate.Tool
	server string
	where  string // where the agent runs, "" for this machine
}

// Spec implements agent.Tool.
func (t agentTool) Spec() agent.ToolSpec {
	s := t.Tool.Spec()
	where := ","
	if t.where != "" {
		where = ", running " + t.where + ","
	}
	s.Description = fmt.Sprintf("Delegate a self-contained task to the agent %q, an out-of-process agent (Agent Client Protocol) with its own model and tools%s and wait for its answer.", t.server, where)
	return s
}

// toolName is what a tool name may be for OpenAI-compatible endpoints.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// agentToolNames names the delegate tool of each server: its own name
// when that is a valid tool name no other tool has, else subagent_<name>
// (characters a tool name cannot have become '_'). Two servers that would
// end up with one name are an error, as is a name too long for a tool.
func agentToolNames(servers, taken []string) (map[string]string, error) {
	used := map[string]string{} // tool name → what has it
	for _, n := range taken {
		used[n] = "a tool of the node's"
	}
	out := make(map[string]string, len(servers))
	var later []string
	// Servers keep their own names first, so that which one is renamed
	// does not depend on sort order.
	for _, s := range servers {
		if _, clash := used[s]; toolName.MatchString(s) && !clash {
			used[s], out[s] = fmt.Sprintf("agent server %q", s), s
		} else {
			later = append(later, s)
		}
	}
	for _, s := range later {
		name := "subagent_" + strings.Map(func(r rune) rune {
			if r < 0x80 && toolName.MatchString(string(r)) {
				return r
			}
			return '_'
		}, s)
		if !toolName.MatchString(name) {
			return nil, fmt.Errorf("agent server %q: its tool name %q is longer than 64 characters: give it a shorter name", s, name)
		}
		if other, clash := used[name]; clash {
			return nil, fmt.Errorf("agent server %q would be offered as tool %q, which is %s: rename one", s, name, other)
		}
		used[name], out[s] = fmt.Sprintf("agent server %q", s), name
	}
	return out, nil
}

// toolNamesOf are the names of tools.
func toolNamesOf(tools []agent.Tool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Spec().Name
	}
	return names
}

// shadowWarning says, when the first node on PATH is this very program,
// that an agent started through "#!/usr/bin/env node" (most npm-installed
// ones) would run it instead of Node.js; "" otherwise.
func shadowWarning() string {
	found, err := exec.LookPath("node")
	if err != nil {
		return ""
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	a, errA := os.Stat(found)
	b, errB := os.Stat(self)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		return ""
	}
	return fmt.Sprintf(`warning: %s, the first node on PATH, is this program, not Node.js: an agent started through "#!/usr/bin/env node" will run it and fail; build it under another name (go build -o subactor ./cmd/node) or put Node.js first on PATH`, found)
}

// runAsNodeJS returns what to say when the node was started in Node.js's
// place: it is named node and was given a file where a command goes, as
// "#!/usr/bin/env node" does when it finds this program first on PATH.
// It returns "" otherwise.
func runAsNodeJS(arg string) string {
	if prog != "node" {
		return ""
	}
	if info, err := os.Stat(arg); err != nil || info.IsDir() {
		return ""
	}
	// The directory on PATH it was found in, not the target of a link.
	where := "its directory"
	if found, err := exec.LookPath("node"); err == nil {
		where = filepath.Dir(found)
	}
	return fmt.Sprintf(`%q is a script, not a command: this is subactor's node binary, not Node.js, run in Node.js's place (a "#!/usr/bin/env node" line found it first on PATH). Build it under another name (go build -o subactor ./cmd/node), or put Node.js's directory before %s on PATH`, arg, where)
}
