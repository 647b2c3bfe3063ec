package registry_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/messages"
)

// subscriber is an embedder's actor subscribed with registry.SendTo: it
// counts and hands the test every event message it handles, in order.
type subscriber struct {
	pid     *actor.PID
	handled atomic.Int32
	events  chan proto.Message
}

func spawnSubscriber(t *testing.T, f fixture) *subscriber {
	s := &subscriber{events: make(chan proto.Message, 4096)}
	s.pid = f.sys.ActorSystem().Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.RunStarted, *messages.RunProgress, *messages.RunEnded,
			*messages.ProviderAdded, *messages.ProviderRemoved, *messages.ListenerFailed:
			s.handled.Add(1)
			s.events <- m.(proto.Message)
		}
	}))
	t.Cleanup(func() { _ = f.sys.ActorSystem().Root.StopFuture(s.pid).Wait() })
	return s
}

func (s *subscriber) next(t *testing.T) proto.Message {
	t.Helper()
	return testkit.Recv(t, s.events, "the subscriber's next event message")
}

// runs starts and settles n runs of p under top, prompts "0", "1", ...
func runs(t *testing.T, f fixture, n int) {
	t.Helper()
	for i := range n {
		r, err := f.svc.Start(context.Background(), "p", request(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(testkit.Ctx(t)); err != nil {
			t.Fatal(err)
		}
		if err := r.Dispose(testkit.Ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// Contracts A3, E1: a subscriber actor is sent a parent's run events as
// protobuf messages by the parent actor, each run's start before its end,
// runs in the order they happened.
func TestA3E1_SendToDeliversAParentsRunEventsInOrder(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	s := spawnSubscriber(t, f)
	defer f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(s.pid)).Release()

	const n = 50
	runs(t, f, n)
	for i := range n {
		start, ok := s.next(t).(*messages.RunStarted)
		if !ok || start.GetProvider() != "p" {
			t.Fatalf("run %d: want its start first, got %v", i, start)
		}
		end, ok := s.next(t).(*messages.RunEnded)
		if !ok || end.GetRunId() != start.GetRunId() || end.GetLastAssistantMessage() != fmt.Sprint(i) || end.GetStopReason() != "completed" {
			t.Fatalf("run %d: want its end after its start %v, got %v", i, start, end)
		}
	}
}

// Contract A3: Flush returns once the subscriber actor has handled every
// event sent before it, not merely once they were sent.
func TestA3_SendToFlushWaitsForTheSubscriber(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	s := spawnSubscriber(t, f)
	sub := f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(s.pid))
	defer sub.Release()

	const n = 40
	runs(t, f, n)
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := s.handled.Load(); got != 2*n {
		t.Fatalf("after Flush the subscriber had handled %d events, want %d", got, 2*n)
	}
}

// Contract A3: after Release the subscriber actor is sent nothing more,
// while a peer subscribed beside it hears the later runs.
func TestA3_SendToReleaseStopsDelivery(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	released, peer := spawnSubscriber(t, f), spawnSubscriber(t, f)
	sub := f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(released.pid))
	peerSub := f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(peer.pid))
	defer peerSub.Release()

	runs(t, f, 1)
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	sub.Release()
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatalf("Flush of a released subscription: %v", err)
	}
	runs(t, f, 3)
	if err := peerSub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Whatever the parent actor sent the released subscriber it sent
	// before the peer's Flush: the subscriber's answer to this Touch comes
	// after it handled that.
	if _, err := f.sys.ActorSystem().Root.RequestFuture(released.pid, &actor.Touch{}, testkit.Deadline).Result(); err != nil {
		t.Fatalf("the released subscriber's Touch: %v", err)
	}
	if got, want := released.handled.Load(), int32(2); got != want {
		t.Fatalf("released subscriber handled %d events, want the %d before its Release", got, want)
	}
	if got, want := peer.handled.Load(), int32(8); got != want {
		t.Fatalf("peer handled %d events, want %d", got, want)
	}
}

// Contract A3: a subscriber actor that stops without releasing its
// subscription is dropped: the parent actor stops watching it and, with
// nothing else to do, is retired, leaving no actor behind.
func TestA3_AStoppedSubscriberIsDroppedAndItsParentRetired(t *testing.T) {
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithIdleParents(0))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	p := f.provider(t, "p", allCaps())
	close(p.release)
	actorsBefore := testkit.LiveActors(f.sys)
	root := f.sys.ActorSystem().Root

	s := spawnSubscriber(t, f)
	sub := f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(s.pid))
	runs(t, f, 1)
	s.next(t)
	s.next(t)
	parentPID := parentActorOf(t, f)
	retired := make(chan struct{})
	watcher := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(parentPID)
		case *actor.Terminated:
			if m.Who.Equal(parentPID) {
				close(retired)
			}
		}
	}))

	if err := root.StopFuture(s.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, retired, "the parent actor's retirement once its only subscriber stopped")
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatalf("Flush of a dropped subscription: %v", err)
	}
	sub.Release() // after the drop: counted once, not twice
	if err := root.StopFuture(watcher).Wait(); err != nil {
		t.Fatal(err)
	}
	f.svc.List() // the retirement went through the registry
	if n := testkit.LiveActors(f.sys); n != actorsBefore {
		t.Fatalf("live actors %d, want %d", n, actorsBefore)
	}

	// The session is heard again by a new subscriber, from a new parent
	// actor.
	again := spawnSubscriber(t, f)
	defer f.svc.ListenParent(top.SessionID(), nil, registry.SendTo(again.pid)).Release()
	runs(t, f, 1)
	if _, ok := again.next(t).(*messages.RunStarted); !ok {
		t.Fatal("a new subscriber did not hear the next run's start")
	}
}

// parentActorOf returns the PID of the one parent actor under the
// Service's registry actor.
func parentActorOf(t *testing.T, f fixture) *actor.PID {
	t.Helper()
	sys := f.sys.ActorSystem()
	var found []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if strings.HasPrefix(id, "subagent-registry-") && strings.Contains(id, "/") {
				found = append(found, id)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("parent actors %v, want one", found)
	}
	return actor.NewPID(sys.Address(), found[0])
}

// Contracts A3, E4: a subscriber actor of Listen is sent the providers
// already registered, then every later registration and release, as
// messages.
func TestA3E4_SendToFollowsRegistrations(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "first", allCaps())
	s := spawnSubscriber(t, f)
	sub := f.svc.Listen(nil, registry.SendTo(s.pid))
	defer sub.Release()
	if m, ok := s.next(t).(*messages.ProviderAdded); !ok || m.GetProvider() != "first" {
		t.Fatalf("replay: %v", m)
	}
	release, err := f.svc.RegisterProvider(&testProvider{name: "second", sys: f.sys})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if m, ok := s.next(t).(*messages.ProviderAdded); !ok || m.GetProvider() != "second" {
		t.Fatalf("added: %v", m)
	}
	if m, ok := s.next(t).(*messages.ProviderRemoved); !ok || m.GetName() != "second" {
		t.Fatalf("removed: %v", m)
	}
}
