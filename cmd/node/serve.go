package main

// The cluster commands: serve joins (or forms) a cluster and hosts runs of
// its agent servers for peers; status prints the members; delegate
// -cluster delegates to an agent server on whichever member offers it.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/fstools"
)

// clusterOptions are the membership flags serve, status, delegate
// -cluster and run -cluster share.
type clusterOptions struct {
	listen, memberListen string
	peers, etcd          string
	name                 string
	tlsCA, tlsCert       string
	tlsKey               string
	insecure             bool
	joinTimeout          time.Duration
}

func clusterFlags(fs *flag.FlagSet, o *clusterOptions, listen string) {
	fs.StringVar(&o.listen, "listen", listen, "the `HOST:PORT` this node's actors listen on (beyond loopback only with TLS or -insecure)")
	fs.StringVar(&o.memberListen, "member-listen", "", "with -peers, this node's membership `HOST:PORT` (default: the listen port plus one)")
	fs.StringVar(&o.peers, "peers", "", "the static member list: `HOST:PORT,...`, each member's membership address")
	fs.StringVar(&o.etcd, "etcd", "", "etcd `ENDPOINTS` (host:port,...) holding the membership, instead of -peers")
	fs.StringVar(&o.name, "cluster-name", "subactor", "the cluster's `NAME`") // cluster.Config's default
	fs.StringVar(&o.tlsCA, "tls-ca", "", "mutual TLS: the `FILE` (PEM) of the CA every member's certificate comes from")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "mutual TLS: this node's certificate `FILE` (PEM)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "mutual TLS: this node's key `FILE` (PEM)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow listening beyond loopback without TLS")
	fs.DurationVar(&o.joinTimeout, "join-timeout", 0, "give up joining after `DURATION`, naming what could not be reached (10s when 0)")
}

// config is the cluster configuration the flags give; a usage error is a
// *configError.
func (o clusterOptions) config() (cluster.Config, error) {
	c := cluster.Config{Name: o.name, Listen: o.listen, MemberListen: o.memberListen, Insecure: o.insecure, JoinTimeout: o.joinTimeout}
	c.Peers, c.Etcd = splitList(o.peers), splitList(o.etcd)
	switch {
	case len(c.Peers) > 0 && len(c.Etcd) > 0:
		return c, configErrorf("give -peers or -etcd, not both")
	case len(c.Peers) == 0 && len(c.Etcd) == 0:
		return c, configErrorf("a cluster needs -peers (a static member list) or -etcd (endpoints)")
	}
	files := []string{o.tlsCA, o.tlsCert, o.tlsKey}
	if slices.ContainsFunc(files, func(f string) bool { return f != "" }) {
		if slices.Contains(files, "") {
			return c, configErrorf("mutual TLS needs -tls-ca, -tls-cert and -tls-key together")
		}
		c.TLS = &cluster.TLSFiles{CA: o.tlsCA, Cert: o.tlsCert, Key: o.tlsKey}
	}
	return c, nil
}

// splitList are the non-empty items of a comma-separated flag.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// join starts the node, saying on logs what it waits for.
func join(ctx context.Context, cfg cluster.Config, logs io.Writer) (*cluster.Node, error) {
	if cfg.System == nil {
		cfg.Logger = logger(logs)
	}
	fmt.Fprintf(logs, "%s: joining cluster %q at %s...\n", prog, cfg.Name, cfg.Listen)
	n, err := cluster.Start(ctx, cfg)
	if errors.Is(err, cluster.ErrConfig) {
		return nil, configErrorf("%v", err)
	}
	return n, err
}

// joinAndWait joins as a member offering nothing and waits, saying so on
// stderr, until the membership satisfies ok or one loss bound passed
// (what is there by then is what there is).
func joinAndWait(ctx context.Context, o clusterOptions, stderr io.Writer, command, what string, ok func(*cluster.Node, []cluster.Member) bool) (*cluster.Node, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	n, err := join(ctx, cfg, stderr)
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, n.LossBound())
	defer cancel()
	fmt.Fprintf(stderr, "%s %s: waiting for %s...\n", prog, command, what)
	_, _ = n.WaitMembers(wait, func(ms []cluster.Member) bool { return ok(n, ms) })
	return n, nil
}

// clusterKeys are the "cluster" object of a -config file, beside
// "agent_servers": the cluster flags (serve's, status's and delegate
// -cluster's), which win when given. offer, offer_model and capacity are
// serve's only: the other commands read them as serve does and use none.
type clusterKeys struct {
	Listen       string   `json:"listen"`
	MemberListen string   `json:"member_listen"`
	Peers        []string `json:"peers"`
	Etcd         []string `json:"etcd"`
	Name         string   `json:"cluster_name"`
	TLSCA        string   `json:"tls_ca"`
	TLSCert      string   `json:"tls_cert"`
	TLSKey       string   `json:"tls_key"`
	Insecure     bool     `json:"insecure"`
	Offer        []string `json:"offer"`
	OfferModel   string   `json:"offer_model"`
	Capacity     int      `json:"capacity"`
}

const clusterKeyNames = "listen, member_listen, peers, etcd, cluster_name, tls_ca, tls_cert, tls_key, insecure, offer, offer_model, capacity"

// applyClusterKeys reads the "cluster" object of the -config file path
// into o for every flag of fs the command line did not set, and returns
// the keys (zero when there are none) with the flags that were set, for
// the command's own keys. It is decoded as strictly as -models (unknown
// or repeated keys, nulls and wrong types are usage errors);
// "agent_servers" is the acp provider's to check.
func applyClusterKeys(fs *flag.FlagSet, path string, o *clusterOptions) (clusterKeys, map[string]bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	data, err := readConfigFile("-config", path, configErrorf)
	if err != nil {
		return clusterKeys{}, set, err
	}
	var file struct {
		AgentServers jsontext.Value `json:"agent_servers"`
		Cluster      *clusterKeys   `json:"cluster"`
	}
	if err := jsonv2.Unmarshal(data, &file); err != nil {
		var e *jsonv2.Error
		if errors.As(err, &e) && e.Problem == jsonv2.Unknown && e.Pointer == "/cluster" {
			return clusterKeys{}, set, configErrorf("-config %s: unknown key %q in \"cluster\" (keys are case-sensitive; they are: %s)", path, e.Name, clusterKeyNames)
		}
		return clusterKeys{}, set, configErrorf("-config %s: %v", path, err)
	}
	k := file.Cluster
	if k == nil {
		return clusterKeys{}, set, nil
	}
	str := func(flag string, dst *string, v string) {
		if !set[flag] && v != "" {
			*dst = v
		}
	}
	str("listen", &o.listen, k.Listen)
	str("member-listen", &o.memberListen, k.MemberListen)
	str("peers", &o.peers, strings.Join(k.Peers, ","))
	str("etcd", &o.etcd, strings.Join(k.Etcd, ","))
	str("cluster-name", &o.name, k.Name)
	// A relative file is the config file's neighbour, as a command is.
	rel := func(f string) string {
		if f == "" || filepath.IsAbs(f) {
			return f
		}
		return filepath.Join(filepath.Dir(path), f)
	}
	str("tls-ca", &o.tlsCA, rel(k.TLSCA))
	str("tls-cert", &o.tlsCert, rel(k.TLSCert))
	str("tls-key", &o.tlsKey, rel(k.TLSKey))
	if !set["insecure"] && k.Insecure {
		o.insecure = true
	}
	return *k, set, nil
}

type serveOptions struct {
	cluster  clusterOptions
	config   string
	offer    string
	capacity int
	// offerModel names the provider of model-backed children (spawn over
	// the node's model) offered to peers; data is where their sessions
	// are kept, model the model flags of run, dir the folder their
	// list, read and count tools read.
	offerModel string
	data       dataPlace
	model      options
	dir        string
}

func serveFlags(o *serveOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" serve", flag.ContinueOnError)
	clusterFlags(fs, &o.cluster, "127.0.0.1:7400")
	configFlag(fs, &o.config, "its agent servers are offered to the cluster")
	fs.StringVar(&o.offer, "offer", "", "offer only these agent servers, `NAME,...` (default: every one in -config)")
	fs.IntVar(&o.capacity, "capacity", 4, "how many runs this node hosts at once for its peers") // cluster.Config's default
	fs.StringVar(&o.offerModel, "offer-model", "", "also offer the node's model (as run's: the embedded default, $"+envBaseURL+" or -models) as the provider `NAME`: in-process children peers can steer")
	dataFlag(fs, &o.data)
	fs.StringVar(&o.model.baseURL, "base-url", "", "with -offer-model, the OpenAI-compatible endpoint's base `URL` (default $"+envBaseURL+")")
	fs.StringVar(&o.model.model, "model", "", "with -offer-model, the `MODEL` to ask for (default $"+envModel+")")
	fs.StringVar(&o.model.modelsFile, "models", "", "with -offer-model, a JSON `FILE` naming several model endpoints, as run's")
	fs.StringVar(&o.dir, "dir", ".", "with -offer-model, the `DIR` its children read with run's list, read and count tools")
	return fs
}

// serveCommand runs serve: it joins the cluster, prints "member <id> at
// <address>" and hosts runs until SIGINT or SIGTERM, then leaves
// gracefully (its runs are cancelled and their callers told).
func serveCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := serveFlags(&o)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return failed(stderr, "serve", configErrorf("serve takes no arguments, got %q", fs.Args()))
	}
	if o.config != "" {
		k, set, err := applyClusterKeys(fs, o.config, &o.cluster)
		if err != nil {
			return failed(stderr, "serve", err)
		}
		if !set["offer"] && len(k.Offer) > 0 {
			o.offer = strings.Join(k.Offer, ",")
		}
		if !set["offer-model"] && k.OfferModel != "" {
			o.offerModel = k.OfferModel
		}
		if !set["capacity"] && k.Capacity != 0 {
			o.capacity = k.Capacity
		}
	}
	cfg, err := o.cluster.config()
	if err != nil {
		return failed(stderr, "serve", err)
	}
	cfg.Capacity = o.capacity
	if o.capacity <= 0 {
		return failed(stderr, "serve", configErrorf("-capacity %d: a node hosts at least one run", o.capacity))
	}
	// The runs of its providers live on the node's actor system.
	cfg.System = actors.NewSystem(actors.WithLogger(clusterwire.QuietLogger(logger(stderr))))
	providers, closeProviders, err := o.providers(cfg.System, stderr)
	if err != nil {
		cfg.System.Shutdown()
		return failed(stderr, "serve", err)
	}
	defer closeProviders()
	cfg.Providers = providers
	n, err := join(ctx, cfg, stderr)
	if err != nil {
		cfg.System.Shutdown()
		return failed(stderr, "serve", err)
	}
	var names []string
	for _, p := range providers {
		names = append(names, p.Name())
	}
	fmt.Fprintf(stdout, "member %s at %s offering [%s], capacity %d\n", n.ID(), n.Address(), strings.Join(names, " "), o.capacity)
	<-ctx.Done()
	fmt.Fprintf(stderr, "%s serve: leaving the cluster...\n", prog)
	// Callers read their runs' ends at once; one that does not (frozen,
	// cut off) is not waited for beyond the stop bound.
	leaveCtx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	n.Leave(leaveCtx)
	return exitOK
}

// providers are what serve offers: the agent servers of -config (all, or
// -offer's) and, with -offer-model, a spawn provider over the node's
// model, its children's sessions in the data directory. The returned
// function releases what they hold once the node left. Warnings go to
// logs.
func (o serveOptions) providers(sys *actors.System, logs io.Writer) ([]subagent.Provider, func(), error) {
	data, err := dataDir(o.data)
	if err != nil {
		return nil, nil, err
	}
	var ps []subagent.Provider
	var servers agentServers
	if o.config != "" {
		if o.offerModel == "" {
			servers, err = loadAgentServers(o.config)
		} else {
			servers, err = readAgentServers(o.config)
		}
		if err != nil {
			return nil, nil, err
		}
		// Its agents are recorded like every other command's, after the
		// journal ended what a killed node left (K4).
		if servers.journal, err = openJournal(data.dir, logs); err != nil {
			return nil, nil, err
		}
		names := servers.names
		if o.offer != "" {
			names = strings.Split(o.offer, ",")
		}
		for _, name := range names {
			c, ok := servers.cfgs[name]
			if !ok {
				return nil, nil, configErrorf("-offer %q: no such agent server in %s", name, o.config)
			}
			c.Name, c.System, c.Journal = name, sys, servers.journal
			p, err := acp.New(c)
			if err != nil {
				return nil, nil, fmt.Errorf("agent server %q: %w", name, err)
			}
			ps = append(ps, p)
		}
	} else if o.offer != "" {
		return nil, nil, configErrorf("-offer names agent servers of -config: give -config too")
	}
	if o.offerModel == "" {
		return ps, func() {}, nil
	}
	if _, clash := servers.cfgs[o.offerModel]; clash {
		return nil, nil, configErrorf("-offer-model %q is also an agent server of -config %s: rename one", o.offerModel, o.config)
	}
	m, err := resolveModels(o.model, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	dir, err := readableDir(o.dir)
	if err != nil {
		return nil, nil, err
	}
	tools, err := fstools.New(dir, fstools.Options{Name: o.dir})
	if err != nil {
		return nil, nil, err
	}
	store, closeStore, err := openStore(context.Background(), data, true)
	if err != nil {
		return nil, nil, err
	}
	p, err := spawn.New(spawn.Config{Name: o.offerModel, System: sys, Store: store, Model: m.top, Models: m.spawnModels(), Tools: tools})
	if err != nil {
		_ = closeStore()
		return nil, nil, err
	}
	return append(ps, p), func() { _ = closeStore() }, nil
}

func statusFlags(o *clusterOptions, config *string, asJSON *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" status", flag.ContinueOnError)
	clusterFlags(fs, o, "127.0.0.1:0")
	fs.StringVar(config, "config", "", "a JSON `FILE` whose \"cluster\" object gives the flags above, as serve's does (a flag given wins)")
	fs.BoolVar(asJSON, "json", false, "print one JSON object per member instead of a line")
	return fs
}

// jsonMember is a member as status -json prints it.
type jsonMember struct {
	ID        string   `json:"id"`
	Address   string   `json:"address"`
	Providers []string `json:"providers"`
	// Capabilities are each provider's start-time features (S4).
	Capabilities map[string]subagent.Capabilities `json:"capabilities"`
	Capacity     int64                            `json:"capacity"`
	Runs         int64                            `json:"runs"`
}

// statusCommand runs status: it joins the cluster as a member offering
// nothing, waits for the membership to settle and prints one line per
// member: its id, address, providers, capacity and runs.
func statusCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o clusterOptions
	var config string
	var asJSON bool
	fs := statusFlags(&o, &config, &asJSON)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if config != "" {
		if _, _, err := applyClusterKeys(fs, config, &o); err != nil {
			return failed(stderr, "status", err)
		}
	}
	// One membership round: the members that answer it.
	// Every member it lists heard from: its state is what status prints.
	n, err := joinAndWait(ctx, o, stderr, "status", "the other members", func(n *cluster.Node, ms []cluster.Member) bool { return len(ms) > 1 && n.Heard() })
	if err != nil {
		return failed(stderr, "status", err)
	}
	defer n.Stop()
	if len(n.Members()) < 2 {
		return failed(stderr, "status", unreached(o))
	}
	enc := newEncoder(stdout)
	for _, m := range n.Members() {
		switch {
		case m.ID == n.ID():
			continue // this command's own client, not a member that serves
		case asJSON:
			j := jsonMember{ID: m.ID, Address: m.Address, Providers: m.Providers, Capabilities: m.Capabilities, Capacity: m.Capacity, Runs: m.Runs}
			if err := enc.Encode(j); err != nil {
				return failed(stderr, "status", err)
			}
			continue
		}
		fmt.Fprintf(stdout, "%s %s providers=[%s] capacity=%d runs=%d\n", m.ID, m.Address, strings.Join(m.Providers, " "), m.Capacity, m.Runs)
	}
	return exitOK
}

// clusterDelegate runs delegate -cluster: the node joins the cluster as a
// member offering nothing and delegates to the agent server -provider on
// a member that offers it, printing what delegate prints.
func clusterDelegate(ctx context.Context, o delegateOptions, stdout, stderr io.Writer) int {
	if o.provider == "" {
		return failed(stderr, "delegate", configErrorf("-cluster needs -provider NAME: the agent server a member offers"))
	}
	req := subagent.StartRequest{Prompt: []subagent.ContentBlock{subagent.Text(o.prompt)}}
	if err := o.features.apply(&req); err != nil {
		return failed(stderr, "delegate", err)
	}
	n, err := joinAndWait(ctx, o.clusterOpts, stderr, "delegate", "a member offering "+o.provider, func(n *cluster.Node, ms []cluster.Member) bool {
		// With start-time features, every member heard from: the one
		// that supports them may not be the first listed.
		return offered(ms, o.provider) && (len(o.features.set) == 0 || n.Heard())
	})
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	defer n.Stop()
	rp, err := remote.New(remote.Config{Name: o.provider, Node: n})
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	svc := registry.New(n.System())
	defer svc.Close()
	release, err := svc.RegisterProvider(rp)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	defer release()
	// The caller's session is kept as a local delegate's is, so that
	// sessions lists it with its child (on a shared store, wherever the
	// child ran).
	data, err := dataDir(o.data)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	store, closeStore, err := openStore(ctx, data, true)
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	defer closeStore()
	parent, err := standInParent(ctx, store, kindDelegate, delegated{Provider: o.provider, Prompt: o.prompt}, subagent.AgentOptions{})
	if err != nil {
		return failed(stderr, "delegate", err)
	}
	closeParent := sync.OnceFunc(parent.Close)
	defer closeParent()
	rep := newReporter(o.quiet, o.json, stdout, stderr)
	if err := printSession(stdout, o.json, parent.SessionID()); err != nil {
		return failed(stderr, "delegate", err)
	}
	events := svc.ListenParent(parent.SessionID(), rep.event)
	req.Parent = parent
	run, err := svc.Start(ctx, o.provider, req)
	if err != nil {
		events.Release()
		rep.close()
		return failed(stderr, "delegate", err)
	}
	stopSteering := func() {}
	if o.steer {
		stopSteering = steerFrom(ctx, os.Stdin, run, stderr)
	}
	// Stopped, the run is cancelled (Start's ctx) and its end waited
	// for stopGrace at most: a host that does not answer is not waited
	// for (it disposes the runs of a caller that is gone).
	end, cancel := afterStop(ctx, stopGrace)
	defer cancel()
	res, err := run.Wait(end)
	if derr := run.Dispose(end); err == nil {
		err = derr
	}
	stopSteering()
	_ = events.Flush(end)
	events.Release()
	rep.close()
	closeParent()
	if err := recordStop(end, store, parent.SessionID(), res, err); err != nil {
		return failed(stderr, "delegate", err)
	}
	return reportChild("delegate", outcome{session: parent.SessionID(), res: res}, o.json, o.quiet, stdout, stderr)
}

// stopGrace bounds what a cluster command still waits for once stopped
// (SIGINT, SIGTERM), so that it ends within two seconds whatever its
// peers do.
const stopGrace = 1500 * time.Millisecond

// afterStop is a context that ends grace after ctx ended.
func afterStop(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	end, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return end, func() { stop(); cancel() }
}

// unreached says that no other member was heard, naming where the node
// looked.
func unreached(o clusterOptions) error {
	if o.etcd != "" {
		return fmt.Errorf("no other member is registered in etcd at %s", o.etcd)
	}
	return fmt.Errorf("no other member answered at the peers %s", o.peers)
}

// errNoSteer answers a steer of a child that takes none (an ACP agent's).
var errNoSteer = fmt.Errorf("%w: the child takes no steer", subagent.ErrNotDelivered)

// steerFrom steers run with each non-empty line of in, one at a time,
// saying on stderr whether the child admitted it (R4). The returned
// function waits for a steer under way (it ends once the run quiesced)
// and stops steering; a line read after it is dropped.
func steerFrom(ctx context.Context, in io.Reader, run subagent.Run, stderr io.Writer) func() {
	var mu sync.Mutex
	stopped := false
	st, steerable := run.(subagent.Steerer)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			msg := strings.TrimSpace(sc.Text())
			if msg == "" {
				continue
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			err := errNoSteer
			if steerable {
				err = st.Steer(ctx, []subagent.ContentBlock{subagent.Text(msg)})
			}
			if err != nil {
				fmt.Fprintf(stderr, "%s delegate: steer %q: %s\n", prog, msg, clean(err.Error()))
			} else {
				fmt.Fprintf(stderr, "%s delegate: steer admitted: %s\n", prog, msg)
			}
			mu.Unlock()
		}
	}()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}

// remoteProviders are the -provider names of run -cluster: the agent
// servers members offer that its top agent may delegate to. Each becomes
// a provider on the node's Service beside spawn and -config's servers, so
// it may be named like neither.
func remoteProviders(list string, servers agentServers) ([]string, error) {
	names := splitList(list)
	if len(names) == 0 {
		return nil, configErrorf("-cluster needs -provider NAME,...: the agent servers members offer")
	}
	for i, name := range names {
		_, configured := servers.cfgs[name]
		switch {
		case slices.Contains(names[:i], name):
			return nil, configErrorf("-provider %q is named twice", name)
		case name == spawn.DefaultName:
			return nil, configErrorf("-provider %q is the name of the node's own provider of children", name)
		case configured:
			return nil, configErrorf("-provider %q is also an agent server of -config %s: rename one", name, servers.path)
		}
	}
	return names, nil
}

// joinForRun joins the cluster for run -cluster as a member offering
// nothing and waits, saying so on logs, until a member offers each of
// providers or one loss bound passed. A provider none offers by then is
// a warning: delegating to it fails until a member offers it.
func joinForRun(ctx context.Context, o clusterOptions, providers []string, logs io.Writer) (*cluster.Node, error) {
	n, err := joinAndWait(ctx, o, logs, "run", "members offering "+strings.Join(providers, ", "), func(_ *cluster.Node, ms []cluster.Member) bool {
		return !slices.ContainsFunc(providers, func(p string) bool { return !offered(ms, p) })
	})
	if err != nil {
		return nil, err
	}
	ms := n.Members()
	for _, p := range providers {
		if !offered(ms, p) {
			fmt.Fprintf(logs, "%s run: no member offers %q yet: delegating to it fails until one does\n", prog, p)
		}
	}
	return n, nil
}

// offered says whether one of ms offers the provider p.
func offered(ms []cluster.Member, p string) bool {
	return slices.ContainsFunc(ms, func(m cluster.Member) bool { return m.Offers(p) })
}

// registerRemote registers on svc a remote provider per name, placing its
// runs on n's peers, and returns their delegate tools (see offerTools),
// named by agentToolNames beside the tool names taken.
func registerRemote(svc *registry.Service, n *cluster.Node, providers []string, store persistence.Store, taken []string, maxDepth int) ([]agent.Tool, func(), error) {
	names, err := agentToolNames(providers, taken)
	if err != nil {
		return nil, nil, configErrorf("-provider: %v", err)
	}
	return offerTools(svc, providers, names, store, maxDepth, "on a member of the cluster", func(name string) (subagent.Provider, error) {
		return remote.New(remote.Config{Name: name, Node: n})
	})
}
