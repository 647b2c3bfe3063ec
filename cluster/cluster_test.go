package cluster_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(clustertest.Leftovers, testkit.DeadLetters)...)
}

// ask sends msg to the node's host actor and returns the answer.
func ask(t *testing.T, n *cluster.Node, msg any) any {
	t.Helper()
	host := actor.NewPID(n.Address(), clusterwire.HostName)
	reply, err := n.System().ActorSystem().Root.RequestFuture(host, msg, testkit.Deadline).Result()
	if err != nil {
		t.Fatalf("asking the host %T: %v", msg, err)
	}
	return reply
}

func refusal(t *testing.T, reply any, code string) *messages.RemoteRefused {
	t.Helper()
	r, ok := reply.(*messages.RemoteRefused)
	if !ok || r.GetCode() != code {
		t.Fatalf("answer %T %v, want a refusal %q", reply, reply, code)
	}
	return r
}

// Contract K1: a node advertises its providers (as member kinds) and
// answers a load query with its providers, capacity and runs.
func TestK1_NodeAdvertisesProvidersCapacityAndLoad(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{Capacity: 3}, clustertest.Echo{})
	ms, err := n.WaitMembers(testkit.Ctx(t), func(ms []cluster.Member) bool { return len(ms) == 1 })
	if err != nil || !ms[0].Offers("echo") || ms[0].ID != n.ID() || ms[0].Address != n.Address() {
		t.Fatalf("members %+v, %v", ms, err)
	}
	load, ok := ask(t, n, &messages.HostStatus{}).(*messages.HostLoad)
	if !ok || load.GetCapacity() != 3 || load.GetRuns() != 0 || strings.Join(load.GetProviders(), ",") != "echo" || load.GetNode() != n.ID() {
		t.Fatalf("load %v", load)
	}
}

// Contract K3: a peer's start is validated like a local one before any
// provider code runs: an unknown provider, an oversized prompt, an empty
// run id or prompt, a negative depth each get a typed refusal; a message
// the host does not take is answered, never a crash.
func TestK3_HostRefusesInvalidRequests(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{MaxPrompt: 16}, clustertest.Echo{})
	prompt := []*messages.ContentBlock{{Type: "text", Text: "hi"}}
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "qwen", Prompt: prompt}), clusterwire.RefusedNoProvider)
	big := []*messages.ContentBlock{{Type: "text", Text: strings.Repeat("x", 17)}}
	r := refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "echo", Prompt: big}), clusterwire.RefusedInvalid)
	if !strings.Contains(r.GetReason(), "prompt") {
		t.Fatalf("refusal %v", r)
	}
	refusal(t, ask(t, n, &messages.RemoteStart{Provider: "echo", Prompt: prompt}), clusterwire.RefusedInvalid)
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "echo"}), clusterwire.RefusedInvalid)
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "echo", Prompt: prompt, ParentDepth: -1}), clusterwire.RefusedInvalid)
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "echo", Prompt: prompt, Continuable: true, ContinueSession: "c"}), clusterwire.RefusedInvalid)
	// echo cannot resume: a resume is refused unsupported (S4), never
	// started as a fresh child.
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "r1", Provider: "echo", Prompt: prompt, ContinueSession: "c"}), clusterwire.FailedUnsupported)
	refusal(t, ask(t, n, &messages.Cancel{}), clusterwire.RefusedUnknownKind)
	if load := ask(t, n, &messages.HostStatus{}).(*messages.HostLoad); load.GetRuns() != 0 {
		t.Fatalf("refused starts left %d runs", load.GetRuns())
	}
}

// Contract K3: ValidateStart bounds every size it is given and converts
// what it accepts faithfully.
func TestK3_ValidateStartConverts(t *testing.T) {
	depth, maxDepth := int64(2), int64(4)
	persona := "terse"
	req, err := cluster.ValidateStart(&messages.RemoteStart{
		RunId: "r", Provider: "p", Prompt: []*messages.ContentBlock{{Type: "text", Text: "do"}},
		Options:  &messages.AgentOptions{Model: "m", MaxDepth: &depth},
		MaxDepth: &maxDepth, Persona: &persona,
		ToolFilter:      &messages.ToolFilter{Deny: []string{"write"}},
		ParentSessionId: "parent", ParentDepth: 1, ContinueSession: "child",
	}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if req.Parent.SessionID() != "parent" || req.Parent.Header().DelegationDepth != 1 || req.Continuation.SessionID != "child" ||
		*req.MaxDepth != 4 || *req.Options.MaxDepth != 2 || *req.Persona != "terse" || req.ToolFilter.Deny[0] != "write" || req.Options.Model != "m" {
		t.Fatalf("request %+v", req)
	}
	if _, err := cluster.ValidateStart(&messages.RemoteStart{RunId: strings.Repeat("r", 129), Prompt: []*messages.ContentBlock{{Text: "x"}}}, 100); err == nil {
		t.Fatal("a 129-byte run id was accepted")
	}
	if _, err := cluster.ValidateStart(&messages.RemoteStart{RunId: "r", ContinueSession: strings.Repeat("c", 129), Prompt: []*messages.ContentBlock{{Text: "x"}}}, 100); err == nil {
		t.Fatal("a 129-byte session to continue was accepted")
	}
}

// Contract K3: only a run's caller may steer, cancel or dispose it; a
// command from anyone else is refused with foreign-run and changes
// nothing.
func TestK3_HostedRunRefusesAForeignSender(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Echo{})
	sys := n.System().ActorSystem()
	started := make(chan *actor.PID, 1)
	quiesced := make(chan struct{})
	caller := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *messages.RemoteStarted:
			started <- c.Sender() // the run actor
		case *messages.RunQuiesced:
			close(quiesced)
		}
	}))
	defer sys.Root.Stop(caller)
	host := actor.NewPID(n.Address(), clusterwire.HostName)
	sys.Root.RequestWithCustomSender(host, &messages.RemoteStart{
		RunId: "run-1", Provider: "echo", Prompt: []*messages.ContentBlock{{Type: "text", Text: "wait"}}, CallerMember: n.ID(),
	}, caller)
	hosted := testkit.Recv(t, started, "the run's start")
	reply, err := sys.Root.RequestFuture(hosted, &messages.Dispose{}, testkit.Deadline).Result()
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, reply, clusterwire.RefusedForeignRun)
	refusal(t, ask(t, n, &messages.RemoteStart{RunId: "run-1", Provider: "echo", Prompt: []*messages.ContentBlock{{Text: "x"}}}), clusterwire.RefusedDuplicate)
	sys.Root.RequestWithCustomSender(hosted, &messages.Dispose{}, caller)
	testkit.Recv(t, quiesced, "the caller's dispose to quiesce the run")
}

// Contract K2: a start from a caller the host's membership does not name
// (a member that left, or one the host has not heard of yet) is refused
// not-a-member: its answers could go to an earlier member's connection
// to the caller's address.
func TestK2_AStartFromACallerNotInTheMembershipIsRefused(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Echo{})
	for _, member := range []string{"", "a-member-that-left"} {
		refusal(t, ask(t, n, &messages.RemoteStart{RunId: "run-" + member, Provider: "echo", Prompt: []*messages.ContentBlock{{Text: "x"}}, CallerMember: member}), clusterwire.RefusedNotMember)
	}
}

// Contract K3: a non-loopback listen address without TLS is refused
// unless Insecure; every interface is never bound.
func TestK3_ConfigRefusesInsecureListen(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:7000", "10.1.2.3:7000", ":7000"} {
		_, err := cluster.Start(context.Background(), cluster.Config{Listen: listen, Peers: []string{"127.0.0.1:7001"}})
		if !errors.Is(err, cluster.ErrConfig) {
			t.Fatalf("listen %s: %v", listen, err)
		}
	}
}

// Contract K3: a node that cannot join (its listen port is taken) fails
// Start with a typed error naming the fault (matching EADDRINUSE) and
// leaves nothing running (the
// actor system Start made is shut down: TestMain checks for leaks).
func TestK3_StartOnATakenPortFailsCleanly(t *testing.T) {
	port, err := clustertest.PortPair()
	if err != nil {
		t.Fatal(err)
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	taken, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	member := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))
	n, err := cluster.Start(context.Background(), cluster.Config{Listen: listen, MemberListen: member, Peers: []string{member}, Providers: []subagent.Provider{clustertest.Echo{}}})
	if err == nil {
		n.Stop()
		t.Fatalf("Start on taken port %s: no error", listen)
	}
	if n != nil {
		t.Fatalf("Start on taken port %s: a node beside its error %v", listen, err)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Start on taken port %s: %v, want an error matching EADDRINUSE", listen, err)
	}
}

// gated is the echo provider whose Start waits for open: an agent's slow
// handshake.
type gated struct {
	clustertest.Echo
	open chan struct{}
}

func (g gated) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Echo.Start(ctx, scope, req)
}

// Contract K1: a start that takes a while is told accepted by the host
// while it is under way, and started by the run actor once the provider
// returned; the run's progress and result follow from the run actor.
func TestK1_ASlowStartIsToldAcceptedThenStarted(t *testing.T) {
	g := gated{open: make(chan struct{})}
	n := clustertest.Node(t, cluster.Config{}, g)
	sys := n.System().ActorSystem()
	got := make(chan any, 8)
	caller := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.RemoteAccepted, *messages.RunSettled:
			got <- m
		case *messages.RemoteStarted:
			got <- c.Sender()
		}
	}))
	defer sys.Root.Stop(caller)
	host := actor.NewPID(n.Address(), clusterwire.HostName)
	sys.Root.RequestWithCustomSender(host, &messages.RemoteStart{
		RunId: "slow", Provider: "echo", Prompt: []*messages.ContentBlock{{Type: "text", Text: "hi"}}, CallerMember: n.ID(),
	}, caller)
	if a, ok := testkit.Recv(t, got, "the slow start's acceptance").(*messages.RemoteAccepted); !ok || a.GetRunId() != "slow" || a.GetRuns() != 1 {
		t.Fatalf("first answer %v, want RemoteAccepted for run slow counting one run", a)
	}
	close(g.open)
	run, ok := testkit.Recv(t, got, "the start's answer").(*actor.PID)
	if !ok || run.Equal(host) {
		t.Fatalf("started from %v, want the run actor", run)
	}
	if s, ok := testkit.Recv(t, got, "the run's result").(*messages.RunSettled); !ok || s.GetResult().GetStopReason() != string(subagent.Completed) {
		t.Fatalf("result %v, want completed", s)
	}
}

// Contracts K2, K1: a continuable child is a grain of its provider's
// kind: Home finds it on the member the identity lookup names for it
// (here the one member), activating it once, and a start of that child
// sent to it is run by that member's host; a start of another child is
// refused invalid, and a provider no member offers has no home.
func TestK2_AContinuableChildIsAGrainOfItsProvider(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Echo{})
	ctx := testkit.Ctx(t)
	home, ok := n.Home(ctx, "echo", "child-1")
	if !ok || home.Address != n.Address() {
		t.Fatalf("home %v, %v: want a grain on %s", home, ok, n.Address())
	}
	if again, ok := n.Home(ctx, "echo", "child-1"); !ok || !again.Equal(home) {
		t.Fatalf("a second lookup found %v, want the same grain %v", again, home)
	}
	if other, ok := n.Home(ctx, "echo", "child-2"); !ok || other.Equal(home) {
		t.Fatalf("another child's home %v, want a grain of its own", other)
	}
	sys := n.System().ActorSystem()
	got := make(chan any, 8)
	caller := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.RemoteStarted, *messages.RemoteRefused, *messages.RunSettled:
			got <- m
		}
	}))
	defer sys.Root.Stop(caller)
	start := func(child string) {
		sys.Root.RequestWithCustomSender(home, &messages.RemoteStart{RunId: child, Provider: "echo",
			Prompt: []*messages.ContentBlock{{Type: "text", Text: "hi"}}, Continuable: true, CallerMember: n.ID()}, caller)
	}
	start("child-1")
	if a, ok := testkit.Recv(t, got, "the grain's start answer").(*messages.RemoteStarted); !ok || a.GetRunId() != "child-1" {
		t.Fatalf("the grain's start answered %v, want the host's RemoteStarted", a)
	}
	if s, ok := testkit.Recv(t, got, "the run's result").(*messages.RunSettled); !ok || s.GetResult().GetStopReason() != string(subagent.Completed) {
		t.Fatalf("result %v, want completed", s)
	}
	start("child-2")
	refusal(t, testkit.Recv(t, got, "the refusal of another child's start"), clusterwire.RefusedInvalid)
	if pid, ok := n.Home(ctx, "qwen", "child-1"); ok {
		t.Fatalf("a provider nobody offers has home %v", pid)
	}
}

// Contract K2: an idle child grain passivates, so that grains do not pile
// up on a member: the next lookup of its child activates a new one.
func TestK2_AnIdleChildGrainPassivates(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Echo{})
	cluster.SetGrainIdle(n, 20*time.Millisecond)
	ctx := testkit.Ctx(t)
	first, ok := n.Home(ctx, "echo", "child-1")
	if !ok {
		t.Fatal("no home for child-1")
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if again, ok := n.Home(ctx, "echo", "child-1"); ok && !again.Equal(first) {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the idle grain %v was never passivated", first)
		}
	}
}
