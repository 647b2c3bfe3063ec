package remote_test

// The remote provider through the Service, on one node that places runs
// on itself: the whole wire path (load query, start, proxy, hosted run,
// events, steer, cancel, dispose) over the node's own remote address. One
// node per process (DECISIONS); several nodes are cmd/node's tests.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/registry"
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

type parent struct{}

func (parent) ID() string                     { return "parent" }
func (parent) SessionID() string              { return "parent" }
func (parent) Header() subagent.SessionHeader { return subagent.SessionHeader{SessionID: "parent"} }
func (parent) Options() subagent.AgentOptions { return subagent.AgentOptions{} }

// events records a parent's events.
type events struct {
	mu  sync.Mutex
	all []subagent.Event
}

func (e *events) listen(ev subagent.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	return nil
}

// service is a Service whose provider name places runs through the
// cluster on a node offering the echo provider with the given capacity.
func service(t *testing.T, name string, capacity int) (*registry.Service, *cluster.Node) {
	t.Helper()
	n := clustertest.Node(t, cluster.Config{Capacity: capacity}, clustertest.Echo{})
	p, err := remote.New(remote.Config{Name: name, Node: n})
	if err != nil {
		t.Fatal(err)
	}
	svc := registry.New(n.System())
	t.Cleanup(svc.Close)
	if _, err := svc.RegisterProvider(p); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitMembers(testkit.Ctx(t), func(ms []cluster.Member) bool { return len(ms) == 1 }); err != nil {
		t.Fatal(err)
	}
	return svc, n
}

func start(t *testing.T, svc *registry.Service, ctx context.Context, prompt string) subagent.Run {
	t.Helper()
	r, err := svc.Start(ctx, "echo", subagent.StartRequest{Parent: parent{}, Prompt: []subagent.ContentBlock{subagent.Text(prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	return r
}

// Contracts P4, K1, R1, R2, E1: a remote run has the Service's run id, no
// local agent and no session here; its events are start (local=false),
// the hosted child's progress and end, in order; its result crosses the
// wire.
func TestP4_R1_RemoteRunKeepsTheRunContract(t *testing.T) {
	svc, _ := service(t, "echo", 2)
	var ev events
	sub := svc.ListenParent("parent", ev.listen)
	defer sub.Release()
	r := start(t, svc, testkit.Ctx(t), "hello")
	if r.LocalAgent() != nil || r.SessionID() != "" || r.ID() == "" {
		t.Fatalf("run id %q session %q agent %v", r.ID(), r.SessionID(), r.LocalAgent())
	}
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "echo: hello" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.all) != 4 {
		t.Fatalf("events %+v", ev.all)
	}
	st, ok1 := ev.all[0].(subagent.RunStarted)
	pr, ok2 := ev.all[2].(subagent.RunProgress)
	end, ok3 := ev.all[3].(subagent.RunEnded)
	// The first progress names the hosting member.
	if host, ok := ev.all[1].(subagent.RunProgress); !ok || host.Kind != clusterwire.HostedBy || host.Text == "" || host.RunID != r.ID() {
		t.Fatalf("events %+v: want the hosting member second", ev.all)
	}
	if !ok1 || !ok2 || !ok3 || st.Local || st.RunID != r.ID() || pr.RunID != r.ID() || pr.Text != "hello" || end.RunID != r.ID() || end.StopReason != subagent.Completed {
		t.Fatalf("events %+v", ev.all)
	}
}

// Contracts R4, K1: a steer crosses the wire and returns once the hosted
// child admitted it; after the run ended a steer fails ErrNotDelivered.
func TestR4_RemoteSteerIsAdmittedOrRefused(t *testing.T) {
	svc, _ := service(t, "echo", 2)
	r := start(t, svc, testkit.Ctx(t), "wait for a steer")
	st, ok := r.(subagent.Steerer)
	if !ok {
		t.Fatal("the remote run of a steerable child is no Steerer")
	}
	if err := st.Steer(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("go on")}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || subagent.TextOf(res.Output) != "echo: go on" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if err := st.Steer(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("late")}); !errors.Is(err, subagent.ErrNotDelivered) {
		t.Fatalf("steer after the end: %v", err)
	}
}

// Contracts S5, R3, K1: cancelling the start's context cancels the
// hosted child (aborted); Dispose is idempotent, safe concurrently, and
// returns once the hosted child quiesced, after which the host's load
// drops it.
func TestR3_RemoteCancelAndConcurrentDispose(t *testing.T) {
	svc, n := service(t, "echo", 2)
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	r := start(t, svc, ctx, "wait")
	cancel()
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := r.Dispose(testkit.Ctx(t)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	awaitUnhosted(t, n, func(l *messages.HostLoad) bool { return slices.Contains(l.GetRunIds(), r.ID()) })
}

// awaitUnhosted waits until no member's answer to a load query shows
// hosting (a host counts a run until its actor stopped, which follows
// its RunQuiesced answer), failing by name at the deadline.
func awaitUnhosted(t *testing.T, n *cluster.Node, hosting func(*messages.HostLoad) bool) {
	t.Helper()
	ctx := testkit.Ctx(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var still []*messages.HostLoad
		for _, m := range n.Members() {
			reply, err := n.System().ActorSystem().Root.RequestFuture(clusterwire.Host(m.Address), &messages.HostStatus{}, testkit.Deadline).Result()
			if err != nil {
				t.Fatalf("load query to %s: %v", m.ID, err)
			}
			if l := reply.(*messages.HostLoad); hosting(l) {
				still = append(still, l)
			}
		}
		if len(still) == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("a disposed run is still hosted: %v", still)
		}
	}
}

// Contract P4: no live member offering the provider is ErrNoMember; every
// member full is ErrNoRoom, with nothing started.
func TestP4_PlacementErrors(t *testing.T) {
	svc, n := service(t, "echo", 1)
	first := start(t, svc, testkit.Ctx(t), "wait")
	_, err := svc.Start(testkit.Ctx(t), "echo", subagent.StartRequest{Parent: parent{}, Prompt: []subagent.ContentBlock{subagent.Text("second")}})
	if !errors.Is(err, remote.ErrNoRoom) || !strings.Contains(err.Error(), "full (1 of 1)") {
		t.Fatalf("start on a full cluster: %v", err)
	}
	if err := first.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}

	other, _ := remote.New(remote.Config{Name: "qwen", Node: n})
	if _, err := other.Start(testkit.Ctx(t), subagent.Scope{}, subagent.StartRequest{Parent: parent{}, Prompt: []subagent.ContentBlock{subagent.Text("x")}}); !errors.Is(err, remote.ErrNoMember) {
		t.Fatalf("start of a provider nobody offers: %v", err)
	}
}
