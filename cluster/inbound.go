package cluster

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/subactor/subactor/messages"
)

// The pinned protoactor-go (2024-08-22) reads a peer's message batch
// without checking it (remote/endpoint_reader.go): a type name no
// linked message has is a nil dereference in the proto serializer, a
// type id, target or sender index past the batch's tables and a
// serializer id past its list are index panics, and ListProcesses and
// GetProcessDiagnostics panic "implement me". Any of them ends the
// process. It also delivers whatever a peer names: a PoisonPill or Stop
// stops the actor it targets (the host actor, say), and a Watch without
// a watcher panics in the watched actor. So the node checks every batch
// on its gRPC stream before protoactor reads it, and refuses the unary
// RPCs; a batch that fails closes its stream (the peer's writer
// reconnects), the node serving everyone else.

// wireTypes are the message types a peer of this node sends: the node's
// own protocol (package messages), and of protoactor's, the watch
// protocol, a request's dead-letter answer, gossip and the activation of
// grains (the identity lookup's).
var wireTypes = func() map[string]bool {
	types := map[string]bool{}
	for _, f := range []protoreflect.FileDescriptor{messages.File_subactor_proto, messages.File_subactor_cluster_proto} {
		for i := range f.Messages().Len() {
			types[string(f.Messages().Get(i).FullName())] = true
		}
	}
	for _, m := range []proto.Message{
		&actor.Watch{}, &actor.Unwatch{}, &actor.Terminated{}, &actor.DeadLetterResponse{},
		&cluster.GossipRequest{}, &cluster.GossipResponse{},
		&cluster.ActivationRequest{}, &cluster.ActivationResponse{},
	} {
		types[string(proto.MessageName(m))] = true
	}
	return types
}()

// protoSerializer is protoactor's serializer id of protobuf, the only
// one its remote uses by default and so the only one nodes send.
const protoSerializer = 0

// checkBatch says why protoactor must not read b, or nil. self is this
// node's actor address: a batch only targets actors here (a target
// elsewhere would make this node relay a peer's message under its own
// connection). A target id that is not, or no longer, registered here
// is left to protoactor's dead letters, as a local send to it is: a
// correct peer sends those when an actor stopped before its message
// arrived.
//
// grainKind says which kinds a peer may ask this node to activate a grain
// of: protoactor answers an activation of a kind it does not know with a
// nil message, which its remote cannot send.
func checkBatch(b *remote.MessageBatch, self string, grainKind func(string) bool) error {
	for _, name := range b.GetTypeNames() {
		if !wireTypes[name] {
			return fmt.Errorf("message type %q is not of the node's protocol", name)
		}
	}
	for _, t := range b.GetTargets() {
		if t.GetAddress() != self {
			return fmt.Errorf("target %s/%s is not on this node (%s)", t.GetAddress(), t.GetId(), self)
		}
	}
	for i, e := range b.GetEnvelopes() {
		switch {
		case e.GetTypeId() < 0 || int(e.GetTypeId()) >= len(b.GetTypeNames()):
			return fmt.Errorf("envelope %d: type id %d outside the batch's %d type names", i, e.GetTypeId(), len(b.GetTypeNames()))
		case e.GetTarget() < 0 || int(e.GetTarget()) >= len(b.GetTargets()):
			return fmt.Errorf("envelope %d: target %d outside the batch's %d targets", i, e.GetTarget(), len(b.GetTargets()))
		case e.GetSender() < 0 || int(e.GetSender()) > len(b.GetSenders()): // 0 is no sender
			return fmt.Errorf("envelope %d: sender %d outside the batch's %d senders", i, e.GetSender(), len(b.GetSenders()))
		case e.GetSerializerId() != protoSerializer:
			return fmt.Errorf("envelope %d: serializer id %d, not protobuf's", i, e.GetSerializerId())
		}
		if err := checkContent(b.GetTypeNames()[e.GetTypeId()], e.GetMessageData(), grainKind); err != nil {
			return fmt.Errorf("envelope %d: %w", i, err)
		}
	}
	return nil
}

// checkContent refuses a watch-protocol message without the PID
// protoactor dereferences when it handles it, and an activation of a
// grain of a kind not offered here or with an identity past maxChildID.
func checkContent(typeName string, data []byte, grainKind func(string) bool) error {
	var pid func() *actor.PID
	var m proto.Message
	switch typeName {
	case string(proto.MessageName(&actor.Watch{})):
		w := &actor.Watch{}
		m, pid = w, w.GetWatcher
	case string(proto.MessageName(&actor.Unwatch{})):
		w := &actor.Unwatch{}
		m, pid = w, w.GetWatcher
	case string(proto.MessageName(&actor.Terminated{})):
		w := &actor.Terminated{}
		m, pid = w, w.GetWho
	case string(proto.MessageName(&cluster.ActivationRequest{})):
		a := &cluster.ActivationRequest{}
		if err := proto.Unmarshal(data, a); err != nil {
			return fmt.Errorf("%s: %w", typeName, err)
		}
		id := a.GetClusterIdentity()
		if !grainKind(id.GetKind()) {
			return fmt.Errorf("%s of kind %.80q, which the node does not offer", typeName, id.GetKind())
		}
		if n := len(id.GetIdentity()); n == 0 || n > maxChildID {
			return fmt.Errorf("%s of an identity of %d bytes (1 to %d)", typeName, n, maxChildID)
		}
		return nil
	default:
		return nil
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("%s: %w", typeName, err)
	}
	if pid() == nil {
		return fmt.Errorf("%s names no actor", typeName)
	}
	return nil
}

var errUnaryRefused = status.Error(codes.Unimplemented, "cluster: this node serves only protoactor's message stream")

// inboundOptions are the gRPC server options that check what peers send
// before protoactor reads it.
func (n *Node) inboundOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		// ListProcesses and GetProcessDiagnostics, the only unary RPCs,
		// panic in the pinned version.
		grpc.UnaryInterceptor(func(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
			n.logger().Warn("cluster: refused a peer's call", "peer", peerAddr(ctx), "method", info.FullMethod, "reason", "the node serves only protoactor's message stream")
			return nil, errUnaryRefused
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
			// The last line, should a check miss a panic of protoactor's
			// reader: the stream ends, not the process.
			defer func() {
				if r := recover(); r != nil {
					n.logger().Error("cluster: protoactor's reader failed on a peer's stream", "peer", peerOf(ss), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					err = status.Error(codes.Internal, "cluster: the node failed on the stream")
				}
			}()
			return handler(srv, checkedStream{ServerStream: ss, n: n})
		}),
	}
}

// checkedStream checks each message batch as it is read.
type checkedStream struct {
	grpc.ServerStream
	n *Node
}

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Error(codes.InvalidArgument, "cluster: not a remoting message")
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := checkBatch(b, s.n.sys.ActorSystem().Address(), s.n.grainKind); err != nil {
			s.n.logger().Warn("cluster: refused a peer's message batch; closing its stream", "peer", peerOf(s), "reason", err)
			return status.Error(codes.InvalidArgument, "cluster: refused message batch: "+err.Error())
		}
	}
	return nil
}

func peerOf(ss grpc.ServerStream) string { return peerAddr(ss.Context()) }

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr.String()
	}
	return "unknown"
}
