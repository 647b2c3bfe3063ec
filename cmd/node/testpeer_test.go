package main

// Test peers of the burst tests (burst_linux_test.go): the test binary
// re-executed with envTestPeer, one protoactor system per process as
// DECISIONS has it.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	wire "github.com/subactor/subactor/messages"
)

// envTestPeer makes the test binary a test peer: "burst LISTEN
// MEMBERSHIP PEER_MEMBERSHIP PEER_LISTEN", "commands LISTEN MEMBERSHIP
// PEER_MEMBERSHIP PEER_LISTEN", "silent LISTEN MEMBERSHIP", "subscriber
// LISTEN", "publisher LISTEN SUBSCRIBER_LISTEN" or "continuable LISTEN
// MEMBERSHIP PEERS STORE_URL RESTARTS" (continuablepeer_test.go).
const envTestPeer = "NODETEST_PEER"

// runTestPeer is a test peer's main.
func runTestPeer() int {
	args := strings.Fields(os.Getenv(envTestPeer))
	var err error
	switch {
	case len(args) == 5 && args[0] == "burst":
		err = burstPeer(args[1], args[2], args[3], args[4])
	case len(args) == 3 && args[0] == "silent":
		err = silentPeer(args[1], args[2])
	case len(args) == 5 && args[0] == "commands":
		err = commandsPeer(args[1], args[2], args[3], args[4])
	case len(args) == 2 && args[0] == "subscriber":
		err = subscriberPeer(args[1])
	case len(args) == 3 && args[0] == "publisher":
		err = publisherPeer(args[1], args[2])
	case len(args) == 6 && args[0] == "continuable":
		err = continuablePeer(args[1], args[2], args[3], args[4], args[5])
	default:
		err = fmt.Errorf("bad %s %q", envTestPeer, args)
	}
	fmt.Fprintln(os.Stderr, "test peer:", err)
	return 1
}

// collector is an actor playing the caller of the runs the peer starts:
// it hands every answer to got, the admission of each run once (a quick
// start's RemoteStarted, or a slow one's RemoteAccepted, as a
// RemoteAccepted), and disposes each run once its result came (from the
// run actor, the result's sender; the host has disposed it already, so
// the run answers once, quiesced).
func collector(n *cluster.Node) (*actor.PID, <-chan any) {
	got := make(chan any, 256)
	admitted := map[string]bool{}
	pid := n.System().ActorSystem().Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *wire.RemoteAccepted, *wire.RemoteStarted:
			id := m.(interface{ GetRunId() string }).GetRunId()
			if !admitted[id] {
				admitted[id] = true
				got <- &wire.RemoteAccepted{RunId: id}
			}
		case *wire.RunSettled:
			ctx.Request(ctx.Sender(), &wire.Dispose{})
			got <- m
		case *wire.RemoteRefused, *wire.RunQuiesced:
			got <- m
		}
	}))
	return pid, got
}

// startBatch is one remoting batch of a RemoteStart per run id, from
// sender to the host at address, the caller being member.
func startBatch(address string, sender *actor.PID, member string, runIDs ...string) (*remote.RemoteMessage, error) {
	b := &remote.MessageBatch{TypeNames: []string{string(proto.MessageName(&wire.RemoteStart{}))}, Targets: []*actor.PID{clusterwire.Host(address)}, Senders: []*actor.PID{sender}}
	for _, id := range runIDs {
		data, err := proto.Marshal(&wire.RemoteStart{RunId: id, Provider: "fake", CallerMember: member,
			Prompt: []*wire.ContentBlock{{Type: "text", Text: "hello " + id}}})
		if err != nil {
			return nil, err
		}
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{MessageData: data, Sender: 1})
	}
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}, nil
}

// burstPeer joins as a member at listen, then sends the host at host one
// start at a time until it names this peer a member and runs that start
// to its end, then 50 starts in one batch. It prints a line per answer to
// the batch: "accepted ID", "refused ID CODE MILLISECONDS" (since the
// batch went), "settled ID STOP_REASON TEXT", "quiesced ID".
func burstPeer(listen, membership, peer, host string) error {
	n, err := cluster.Start(context.Background(), cluster.Config{Listen: listen, MemberListen: membership,
		Peers: []string{membership, peer}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	sender, got := collector(n)
	conn, err := grpc.Dial(host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	stream, err := remote.NewRemotingClient(conn).Receive(context.Background())
	if err != nil {
		return err
	}
	send := func(ids ...string) error {
		m, err := startBatch(host, sender, n.ID(), ids...)
		if err == nil {
			err = stream.Send(m)
		}
		return err
	}
	for i := 0; ; i++ {
		if err := send(fmt.Sprint("first-", i)); err != nil {
			return err
		}
		r, refused := (<-got).(*wire.RemoteRefused)
		if !refused {
			break
		}
		if r.GetCode() != clusterwire.RefusedNotMember {
			return fmt.Errorf("the first start refused: %v", r)
		}
	}
	for _, want := range []string{"result", "quiescence"} {
		switch m := (<-got).(type) {
		case *wire.RunSettled, *wire.RunQuiesced:
		default:
			return fmt.Errorf("the first start answered %v, not its %s", m, want)
		}
	}
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = fmt.Sprint("burst-", i)
	}
	sent := time.Now()
	if err := send(ids...); err != nil {
		return err
	}
	for m := range got {
		switch m := m.(type) {
		case *wire.RemoteAccepted:
			fmt.Println("accepted", m.GetRunId())
		case *wire.RemoteRefused:
			fmt.Println("refused", m.GetRunId(), m.GetCode(), time.Since(sent).Milliseconds())
		case *wire.RunSettled:
			text := ""
			if out := m.GetResult().GetOutput(); len(out) > 0 {
				text = out[0].GetText()
			}
			fmt.Println("settled", m.GetRunId(), m.GetResult().GetStopReason(), text)
		case *wire.RunQuiesced:
			fmt.Println("quiesced", m.GetRunId())
		}
	}
	return nil
}

// silentPeer plays a member at listen that offers "fake" and answers
// load queries (with room for it) but never a start. It prints "ready"
// once it serves, then "start" for each start it gets.
func silentPeer(listen, membership string) error {
	host, p, _ := net.SplitHostPort(listen)
	port, _ := strconv.Atoi(p)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	remote.NewRemote(sys, remote.Configure(host, port)).Start()
	state := &wire.MemberState{Capacity: 4, Providers: []*wire.ProviderOffer{{Name: "fake"}}}
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *wire.HostStatus:
			ctx.Respond(&wire.HostLoad{Node: sys.ID, Providers: []string{"fake"}, Capacity: 4, State: state})
		case *wire.RemoteStart:
			fmt.Println("start")
		}
	}), clusterwire.HostName)
	if err != nil {
		return err
	}
	answer, err := protojson.Marshal(&pcluster.Member{Id: sys.ID, Host: host, Port: int32(port), Kinds: []string{"subactor.provider:fake"}})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", membership)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return http.Serve(lis, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(answer) }))
}

// commandsPeer joins as a member at listen and plays an actor platform's
// actor that commands a run hosted by the node at host with messages
// only, as it would a local run (A3): it starts a "wait" run of "fake"
// there, watches the run actor, steers it, has a second actor try to
// cancel it, cancels and disposes it. It prints a line per step and
// answer: "started", "foreign CODE", "steer ADMITTED", "settled
// STOP_REASON", "quiesced", "terminated".
func commandsPeer(listen, membership, peer, host string) error {
	n, err := cluster.Start(context.Background(), cluster.Config{Listen: listen, MemberListen: membership,
		Peers: []string{membership, peer}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	sys := n.System().ActorSystem()
	got := make(chan any, 16)
	caller := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *wire.RemoteStarted:
			ctx.Watch(ctx.Sender()) // the run actor
			got <- ctx.Sender()
		case *wire.RemoteRefused, *wire.RemoteStartFailed, *wire.SteerAnswer, *wire.RunSettled, *wire.RunQuiesced, *actor.Terminated:
			got <- m
		}
	}))
	var run *actor.PID
	for run == nil {
		sys.Root.RequestWithCustomSender(clusterwire.Host(host), &wire.RemoteStart{RunId: "a3", Provider: "fake", CallerMember: n.ID(),
			Prompt: []*wire.ContentBlock{{Type: "text", Text: "wait for the commands"}}}, caller)
		switch m := (<-got).(type) {
		case *actor.PID:
			run = m
		case *wire.RemoteRefused:
			if m.GetCode() != clusterwire.RefusedNotMember {
				return fmt.Errorf("the start refused: %v", m)
			}
		default:
			return fmt.Errorf("the start answered %v", m)
		}
	}
	fmt.Println("started")
	sys.Root.RequestWithCustomSender(run, &wire.Steer{SteerId: 1, Content: []*wire.ContentBlock{{Type: "text", Text: "also this"}}}, caller)
	reply, err := sys.Root.RequestFuture(run, &wire.Cancel{Reason: "not mine"}, time.Minute).Result()
	if r, ok := reply.(*wire.RemoteRefused); ok && err == nil {
		fmt.Println("foreign", r.GetCode())
	} else {
		return fmt.Errorf("a foreign cancel answered %v, %v", reply, err)
	}
	sys.Root.RequestWithCustomSender(run, &wire.Cancel{Reason: "by message"}, caller)
	// RunQuiesced comes before the actor stops, but protoactor hands
	// the watcher Terminated, a system message, ahead of user messages
	// already in its mailbox: wait for both.
	var quiesced, terminated bool
	for m := range got {
		switch m := m.(type) {
		case *wire.SteerAnswer:
			fmt.Println("steer", m.GetAdmitted())
		case *wire.RunSettled:
			fmt.Println("settled", m.GetResult().GetStopReason())
			sys.Root.RequestWithCustomSender(run, &wire.Dispose{}, caller)
		case *wire.RunQuiesced:
			fmt.Println("quiesced")
			quiesced = true
		case *actor.Terminated:
			fmt.Println("terminated")
			terminated = true
		}
		if quiesced && terminated {
			return nil
		}
	}
	return nil
}

// remoteSystem is a protoactor system reached at listen, without a
// cluster: what SendTo needs of a subscriber elsewhere is an address.
func remoteSystem(listen string) *actor.ActorSystem {
	host, p, _ := net.SplitHostPort(listen)
	port, _ := strconv.Atoi(p)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	remote.NewRemote(sys, remote.Configure(host, port)).Start()
	return sys
}

// subscriberPeer is a platform's actor, named "subscriber", in a process
// of its own at listen, following a parent's runs in another (A3). It
// prints "ready", then a line per event: "started PROVIDER", "progress
// KIND", "ended STOP_REASON TEXT".
func subscriberPeer(listen string) error {
	sys := remoteSystem(listen)
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *wire.RunStarted:
			fmt.Println("started", m.GetProvider())
		case *wire.RunProgress:
			fmt.Println("progress", m.GetKind())
		case *wire.RunEnded:
			fmt.Println("ended", m.GetStopReason(), m.GetLastAssistantMessage())
		}
	}), "subscriber")
	if err != nil {
		return err
	}
	fmt.Println("ready")
	select {}
}

// publisherPeer runs a parent at listen whose runs' events go to the
// subscriber at subscriber (registry.SendTo): it delegates "echo hello
// across" to a spawn child, then prints "flushed" once the subscriber
// handled every event (Flush), or the error.
func publisherPeer(listen, subscriber string) error {
	rt, err := subactor.New(subactor.Config{System: actors.Wrap(remoteSystem(listen))})
	if err != nil {
		return err
	}
	ctx := context.Background()
	parent, err := rt.NewAgent(ctx, "parent")
	if err != nil {
		return err
	}
	sub := rt.Service.ListenParent(parent.SessionID(), nil, registry.SendTo(actor.NewPID(subscriber, "subscriber")))
	if _, err := rt.Delegate(ctx, parent, "echo hello across"); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := sub.Flush(fctx); err != nil {
		return err
	}
	fmt.Println("flushed")
	select {}
}
