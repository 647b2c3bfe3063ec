// Package clustertest helps test code that runs on one cluster node: a
// single-member node on loopback and an in-process provider to host. One
// node per process: protoactor's remote code races when several share one
// (see the repository's DECISIONS), so multi-node tests run node
// processes.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/subagent"
)

// Leftovers are the goroutines protoactor's cluster leaves behind after
// a node's Stop, matched by function name only (DECISIONS: never
// globally): its membership loop until its next round, its log
// throttles, and the gRPC client connections to peers that its
// non-graceful shutdown does not close.
var Leftovers = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
	goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransport"),
	// Its name since grpc v1.6x (the OTLP exporters need v1.83).
	goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointWriter).initialize"),
	goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	// The gossip's log throttle: a timer that ends on its own.
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
}

// Node starts a node that is the only member of its static list on
// loopback ports it picks, offering providers; cfg's Listen, Peers and
// MemberListen are replaced. It stops when the test ends.
func Node(t testing.TB, cfg cluster.Config, providers ...subagent.Provider) *cluster.Node {
	t.Helper()
	port, err := PortPair()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg.MemberListen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))
	cfg.Peers = []string{cfg.MemberListen}
	cfg.Providers = providers
	n, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// PortPair returns a loopback port p such that p and p+1 were free: a
// node's listen port and, by default, its membership port. It picks
// below the kernel's ephemeral range (32768 and up on Linux), so that
// no outgoing connection or ":0" listener can take either port between
// this check and the node's own bind; only another test's pick could.
func PortPair() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		l.Close()
		if err == nil {
			l2.Close()
			return p, nil
		}
	}
	return 0, errors.New("clustertest: no two consecutive free loopback ports")
}

// Echo is an in-process provider named "echo": a child that answers
// "echo: <prompt>" at once, or, for a prompt starting with "wait", only
// once it is cancelled (aborted) or steered ("echo: <message>"). It
// reports one progress event, the prompt as message text.
//
// Its run is a Run of its own, as a third-party provider's may be, which
// a hosting node wraps in a run actor; with System set, a child that
// answers at once is a run actor itself (run.Start), as the spawn and acp
// providers' children are.
type Echo struct{ System *actors.System }

func (Echo) Name() string                        { return "echo" }
func (Echo) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (Echo) InheritsParentContext() bool         { return false }

// Start implements subagent.Provider.
func (e Echo) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	prompt := subagent.TextOf(req.Prompt)
	r := &echoRun{id: scope.RunID, done: make(chan struct{}), steer: make(chan string)}
	if scope.Events != nil {
		scope.Events.Emit(subagent.RunProgress{RunID: r.id, Kind: subagent.MessageText, Step: 1, Text: prompt})
	}
	if e.System != nil && !strings.HasPrefix(prompt, "wait") {
		out := subagent.Result{StopReason: subagent.Completed, Output: []subagent.ContentBlock{subagent.Text("echo: " + prompt)}}
		return run.Start(e.System, run.Spec{Scope: scope, Ctx: ctx, Cancel: scope.Cancel,
			Body: func(context.Context, run.Gate) (subagent.Result, error) { return out, nil }}), nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	stop := context.AfterFunc(ctx, cancel)
	go func() {
		defer stop()
		echo := prompt
		if strings.HasPrefix(prompt, "wait") {
			select {
			case echo = <-r.steer:
			case <-runCtx.Done():
				r.settle(subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled"})
				return
			}
		}
		r.settle(subagent.Result{StopReason: subagent.Completed, Output: []subagent.ContentBlock{subagent.Text("echo: " + echo)}})
	}()
	return r, nil
}

type echoRun struct {
	id     string
	cancel context.CancelFunc
	steer  chan string
	done   chan struct{}

	mu  sync.Mutex
	res *subagent.Result
	obs []func(subagent.Result, error)
}

func (r *echoRun) settle(res subagent.Result) {
	r.mu.Lock()
	r.res = &res
	obs := r.obs
	r.mu.Unlock()
	for _, f := range obs {
		f(res, nil)
	}
	close(r.done)
}

func (r *echoRun) ID() string                 { return r.id }
func (r *echoRun) SessionID() string          { return "" }
func (r *echoRun) LocalAgent() subagent.Agent { return nil }

func (r *echoRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return subagent.Result{}, err // settled or not (R2's Wait)
	}
	return *r.res, nil
}

func (r *echoRun) OnSettled(f func(subagent.Result, error)) {
	r.mu.Lock()
	if r.res != nil {
		res := *r.res
		r.mu.Unlock()
		f(res, nil)
		return
	}
	r.obs = append(r.obs, f)
	r.mu.Unlock()
}

func (r *echoRun) Dispose(ctx context.Context) error {
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Steer admits the message while the child waits.
func (r *echoRun) Steer(ctx context.Context, message []subagent.ContentBlock) error {
	select {
	case r.steer <- subagent.TextOf(message):
		return nil
	case <-r.done:
		return fmt.Errorf("%w: the child ended", subagent.ErrNotDelivered)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", subagent.ErrNotDelivered, ctx.Err())
	}
}
