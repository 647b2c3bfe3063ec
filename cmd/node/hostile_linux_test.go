package main

// Contract K3: what a peer with a valid certificate sends over
// protoactor's remoting protocol never crashes nor disables a node. Each
// case is a raw gRPC client (the test, holding a certificate of the
// cluster's CA) that sends one malformed batch to a real `node serve`
// over mutual TLS; the node closes that stream, logs why on stderr, and a
// good caller's delegation then completes.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/testkit"
	wire "github.com/subactor/subactor/messages"
)

// rawPeer dials the node at address as a remoting client over mutual TLS
// with the certificate of tlsFlags (ca.issue's flags).
func rawPeer(t *testing.T, address string, tlsFlags []string) remote.RemotingClient {
	t.Helper()
	flag := func(name string) string { return tlsFlags[slices.Index(tlsFlags, name)+1] }
	cert, err := tls.LoadX509KeyPair(flag("-tls-cert"), flag("-tls-key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(flag("-tls-ca"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool})
	conn, err := grpc.Dial(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return remote.NewRemotingClient(conn)
}

// marshal is m's wire bytes.
func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Contract K3: one test per malformed batch (and the unary RPC protoactor
// leaves unimplemented), each against the same node, which must go on
// serving a good caller after each.
func TestK3_AMalformedRemotingMessageNeitherCrashesNorDisablesTheNode(t *testing.T) {
	ca := newCA(t, "cluster-ca")
	a, b := newMember(t), newMember(t)
	how := static(a, b)
	nodeB, _ := serve(t, b, how, ca.issue(t, "b")...)
	peer := rawPeer(t, b.listen, ca.issue(t, "raw"))
	callerTLS := ca.issue(t, "a")

	host := clusterwire.Host(b.listen)
	status := marshal(t, &wire.HostStatus{})
	caller := actor.NewPID(a.listen, "caller")
	batch := func(typeName string, data []byte, edit func(*remote.MessageEnvelope)) *remote.MessageBatch {
		e := &remote.MessageEnvelope{TypeId: 0, MessageData: data, Target: 0, Sender: 1}
		if edit != nil {
			edit(e)
		}
		return &remote.MessageBatch{TypeNames: []string{typeName}, Targets: []*actor.PID{host}, Senders: []*actor.PID{caller}, Envelopes: []*remote.MessageEnvelope{e}}
	}
	hostStatus := string(proto.MessageName(&wire.HostStatus{}))
	activation := string(proto.MessageName(&pcluster.ActivationRequest{}))
	for _, c := range []struct {
		name  string
		batch *remote.MessageBatch
		// reason is what serve's stderr says why it refused the batch.
		reason string
	}{
		{"UnknownTypeName", batch("subactor.messages.NoSuchMessage", status, nil), `subactor.messages.NoSuchMessage\" is not of the node's protocol`},
		{"TypeIDPastTheTypeNames", batch(hostStatus, status, func(e *remote.MessageEnvelope) { e.TypeId = 3 }), "envelope 0: type id 3 outside the batch's 1 type names"},
		{"TargetPastTheTargets", batch(hostStatus, status, func(e *remote.MessageEnvelope) { e.Target = 2 }), "envelope 0: target 2 outside the batch's 1 targets"},
		{"SenderPastTheSenders", batch(hostStatus, status, func(e *remote.MessageEnvelope) { e.Sender = 5 }), "envelope 0: sender 5 outside the batch's 1 senders"},
		{"UnknownSerializerID", batch(hostStatus, status, func(e *remote.MessageEnvelope) { e.SerializerId = 7 }), "envelope 0: serializer id 7, not protobuf's"},
		{"PoisonPillToTheHostActor", batch(string(proto.MessageName(&actor.PoisonPill{})), marshal(t, &actor.PoisonPill{}), func(e *remote.MessageEnvelope) { e.Sender = 0 }), `actor.PoisonPill\" is not of the node's protocol`},
		// protoactor answers an activation of a kind it does not know
		// with a nil message, which its remote cannot send.
		{"ActivationOfAKindNotOffered", batch(activation, marshal(t, &pcluster.ActivationRequest{ClusterIdentity: &pcluster.ClusterIdentity{Kind: "subactor.provider:nobody", Identity: "c"}}), nil),
			"subactor.provider:nobody" + `\", which the node does not offer`},
		{"ActivationOfAnOversizedIdentity", batch(activation, marshal(t, &pcluster.ActivationRequest{ClusterIdentity: &pcluster.ClusterIdentity{Kind: "subactor.provider:fake", Identity: strings.Repeat("c", 200)}}), nil),
			"an identity of 200 bytes (1 to 128)"},
		{"WatchWithoutAWatcher", batch(string(proto.MessageName(&actor.Watch{})), marshal(t, &actor.Watch{}), func(e *remote.MessageEnvelope) { e.Sender = 0 }), "envelope 0: actor.Watch names no actor"},
		// The host actor of another node: relaying it would send a peer's
		// message under this node's own connection.
		{"TargetOnAnotherNode", func() *remote.MessageBatch {
			b := batch(hostStatus, status, nil)
			b.Targets = []*actor.PID{clusterwire.Host(a.listen)}
			return b
		}(), fmt.Sprintf("target %s/%s is not on this node (%s)", a.listen, clusterwire.Host(a.listen).GetId(), b.listen)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(nodeB.stderr.String())
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
			defer cancel()
			stream, err := peer.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: c.batch}}); err != nil {
				t.Fatal(err)
			}
			// The node refuses the batch by closing the stream.
			if _, err := stream.Recv(); statusCode(err) != codes.InvalidArgument {
				t.Fatalf("the stream after the batch: %v, want it closed InvalidArgument", err)
			}
			logsRefusal(t, nodeB, before, "refused a peer's message batch; closing its stream", c.reason)
			delegatesOver(t, a, how, callerTLS, nodeB)
		})
	}
	t.Run("ListProcesses", func(t *testing.T) {
		before := len(nodeB.stderr.String())
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
		defer cancel()
		if _, err := peer.ListProcesses(ctx, &remote.ListProcessesRequest{}); statusCode(err) != codes.Unimplemented {
			t.Fatalf("ListProcesses: %v, want Unimplemented", err)
		}
		logsRefusal(t, nodeB, before, "refused a peer's call", "method=/remote.Remoting/ListProcesses")
		before = len(nodeB.stderr.String())
		if _, err := peer.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{Pid: host}); statusCode(err) != codes.Unimplemented {
			t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
		}
		logsRefusal(t, nodeB, before, "refused a peer's call", "method=/remote.Remoting/GetProcessDiagnostics")
		delegatesOver(t, a, how, callerTLS, nodeB)
	})
}

// logsRefusal waits until serve's stderr past offset has a line saying
// what (the refusal) with why (its reason), and fails naming both at the
// deadline.
func logsRefusal(t *testing.T, serve *process, offset int, what, why string) {
	t.Helper()
	says := func() bool {
		for _, l := range strings.Split(serve.stderr.String()[offset:], "\n") {
			if strings.Contains(l, what) && strings.Contains(l, why) {
				return true
			}
		}
		return false
	}
	deadline := time.NewTimer(testkit.Deadline)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond) // a pipe's reader: nothing to wait on
	defer tick.Stop()
	for !says() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("waited %s for serve's stderr to say %q with %q; it said:\n%s", testkit.Deadline, what, why, serve.stderr.String()[offset:])
		}
	}
}

func statusCode(err error) codes.Code {
	s, _ := status.FromError(err)
	return s.Code()
}

// delegatesOver runs a delegation from m to the node serve, which must
// still run.
func delegatesOver(t *testing.T, m member, how membership, tlsFlags []string, serve *process) {
	t.Helper()
	caller := startNode(t, delegateArgs(m, how, append(slices.Clone(tlsFlags), "hello after the batch")...)...)
	if code := caller.rest(t); code != 0 || !slices.ContainsFunc(caller.all, func(l string) bool { return strings.Contains(l, "echo: hello after the batch") }) {
		t.Fatalf("a good caller afterwards: exit %d, stdout %q, stderr %s; serve's stderr %s", code, caller.all, caller.stderr.String(), serve.stderr.String())
	}
	if serve.cmd.ProcessState != nil {
		t.Fatalf("serve ended: %s", serve.stderr.String())
	}
}
