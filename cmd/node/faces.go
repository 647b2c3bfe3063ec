package main

// What the node's two faces share (node acp, acpagent.go; node mcp,
// mcpserver.go): their flags, the data directory's store and agent
// journal, the models, the -config file's agent servers, and the
// delegation tree each session builds on them.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/tools/delegate"
	"github.com/subactor/subactor/tools/fstools"
)

// Bounds on what a face's client may ask (K3). A frame is bounded by the
// SDKs (ACP: 10 MiB a line; MCP: maxFrame).
const (
	// maxPromptBytes is the most text one prompt or delegation may carry.
	maxPromptBytes = 1 << 20
	// maxSessions is the most sessions one ACP connection may hold open.
	maxSessions = 64
	// maxFrame is the longest MCP frame (one JSON-RPC message) read.
	maxFrame = 4 << 20
	// maxConcurrent is the most delegations an MCP client may run at once.
	maxConcurrent = 16
)

// errPromptTooLarge is a prompt over maxPromptBytes.
var errPromptTooLarge = fmt.Errorf("the prompt is over %d bytes", maxPromptBytes)

// faceFlags is the flag set of a face command: the data directory, the
// models, -config and -max-depth, and node mcp's -listen flags when l is
// not nil.
func faceFlags(name string, o *options, l *listenOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	if l != nil {
		listenFlags(fs, l)
	}
	dataFlag(fs, &o.data)
	modelFlags(fs, o)
	configFlag(fs, &o.config, "children may be delegated to each server")
	fs.IntVar(&o.maxDepth, "max-depth", delegate.DefaultMaxDepth, "the deepest delegation level below a session's top agent")
	fs.BoolVar(&o.cluster, "cluster", false, `join the cluster the -config file's "cluster" object names (as serve reads it) and delegate to the agent servers -provider names on its members`)
	fs.StringVar(&o.providers, "provider", "", "with -cluster, the agent servers `NAME,...` members offer that children may be delegated to")
	return fs
}

// parseFace parses a face command's flags (no arguments); when ok is
// false the command ends with code.
func parseFace(name string, args []string, stdout, stderr io.Writer, l *listenOptions) (o options, code int, ok bool) {
	fs := faceFlags(name, &o, l)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return o, code, false
	}
	var msg string
	switch {
	case fs.NArg() > 0:
		msg = fmt.Sprintf("unexpected argument %q: the client sends the prompts", fs.Arg(0))
	case o.maxDepth < 0:
		msg = fmt.Sprintf("-max-depth %d must not be negative", o.maxDepth)
	case o.limits.header < 0 || o.limits.idle < 0 || o.limits.call < 0:
		msg = "-header-timeout, -idle-timeout and -call-timeout must not be negative"
	case o.providers != "" && !o.cluster:
		msg = "-provider names agent servers on cluster members: give -cluster too"
	case o.cluster && o.config == "":
		msg = `-cluster reads the membership from the "cluster" object of -config FILE: give -config`
	}
	if msg != "" {
		fmt.Fprintf(stderr, "%s %s: %s\n", prog, name, msg)
		return o, exitUsage, false
	}
	return o, exitOK, true
}

// face is what a face command holds while it serves its client: the
// models, the agent servers, the store, the agent journal (K4: opening it
// ends what a killed node left) and the actor system every session's
// tree runs on.
type face struct {
	o     options
	m     models
	store persistence.Store
	sys   *actors.System
	// member is the node's cluster member with -cluster (its system is
	// sys): the trees delegate to o.remote on its peers.
	member *cluster.Node
	logs   io.Writer
	close  func()
}

// openFace reads a face's configuration and opens its data directory.
// The error is a configError or a model error (exit 2) or a failure to
// open the data directory.
func openFace(ctx context.Context, o options, logs io.Writer) (*face, error) {
	m, err := resolveModels(o, os.Getenv)
	if err == nil && o.config != "" {
		if o.cluster {
			// The file may name no agent server of its own.
			o.servers, err = readAgentServers(o.config)
		} else {
			o.servers, err = loadAgentServers(o.config)
		}
		if err == nil {
			err = o.servers.checkBesideSpawn()
		}
	}
	if err == nil && o.cluster {
		err = o.clusterFromConfig()
	}
	if err != nil {
		return nil, err
	}
	data, err := dataDir(o.data)
	if err != nil {
		return nil, err
	}
	store, closeStore, err := openStore(ctx, data, true)
	if err != nil {
		return nil, err
	}
	if o.servers.journal, err = openJournal(data.dir, logs); err != nil {
		_ = closeStore()
		return nil, err
	}
	if o.cluster {
		member, err := joinForRun(ctx, o.clusterOpts, o.remote, logs)
		if err != nil {
			_ = closeStore()
			return nil, err
		}
		return &face{o: o, m: m, store: store, sys: member.System(), member: member, logs: logs, close: sync.OnceFunc(func() {
			member.Stop()
			_ = closeStore()
		})}, nil
	}
	sys := actors.NewSystem(actors.WithLogger(logger(logs)))
	return &face{o: o, m: m, store: store, sys: sys, logs: logs, close: sync.OnceFunc(func() {
		sys.Shutdown()
		_ = closeStore()
	})}, nil
}

// clusterFromConfig reads -provider and the membership, from the
// -config file's "cluster" object (its listen address, peers or etcd,
// name and TLS files, as serve reads them; loopback by default): the
// faces take no membership flags, since node mcp's -listen and -tls-*
// are its HTTP server's.
func (o *options) clusterFromConfig() error {
	var err error
	if o.remote, err = remoteProviders(o.providers, o.servers); err != nil {
		return err
	}
	o.clusterOpts = clusterOptions{listen: "127.0.0.1:0", name: "subactor"}
	if _, _, err := applyClusterKeys(flag.NewFlagSet("cluster", flag.ContinueOnError), o.config, &o.clusterOpts); err != nil {
		return err
	}
	_, err = o.clusterOpts.config()
	return err
}

// delegationTree is one delegation tree: a Service with a task manager, the spawn
// provider (children with the file tools confined to the tree's
// directory) and a provider per agent server; tools are its top agent's.
type delegationTree struct {
	svc   *registry.Service
	mgr   *tasks.Manager
	tools []agent.Tool
	close func()
}

// tree builds a delegation tree working in dir (absolute), whose agent
// servers' starts are shown on rep; relay, when set, sends what their
// children ask of their client to an editor.
func (f *face) tree(dir string, rep reporter, relay *editorRelay) (*delegationTree, error) {
	fsTools, err := fstools.New(dir, fstools.Options{})
	if err != nil {
		return nil, fmt.Errorf("cannot read directory %q: %w", dir, err)
	}
	taskStore, _ := f.store.(persistence.TaskStore) // both stores keep tasks
	mgr := tasks.New(f.sys, taskStore)
	svc := registry.New(f.sys, registry.WithTasks(mgr))
	stop := func() {
		svc.Close()
		_ = mgr.Close(context.Background())
	}
	servers := f.o.servers
	servers.relay = relay
	tools, closeTools, err := delegationTools(svc, mgr, f.sys, f.store, f.m, fsTools, servers, dir, rep, f.o.maxDepth)
	if err != nil {
		stop()
		return nil, err
	}
	if f.member != nil {
		remoteTools, closeRemote, err := registerRemote(svc, f.member, f.o.remote, f.store, toolNamesOf(tools), f.o.maxDepth)
		if err != nil {
			stop()
			closeTools()
			return nil, err
		}
		tools = slices.Concat(tools, remoteTools)
		closeLocal := closeTools
		closeTools = func() { closeRemote(); closeLocal() }
	}
	return &delegationTree{svc: svc, mgr: mgr, tools: tools, close: sync.OnceFunc(func() {
		// The Service first: it kills the live children, then the
		// tools and providers go.
		stop()
		closeTools()
	})}, nil
}

// faceFailed is how a face command that could not start ends.
func faceFailed(stderr io.Writer, name string, err error) int {
	if errors.Is(err, context.Canceled) {
		return exitFailed
	}
	return failed(stderr, name, err)
}
