package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/messages"
)

// A continuable child is a grain of its provider's kind, keyed by its
// child id (K2): the identity lookup (rendezvous hashing over the live
// members offering the provider) names the child's home member and
// activates the grain there, and the grain hands the child's starts to
// its node's host, which admits and runs them as any start. So every
// caller sends a child's first activation and each resume to one member
// while membership holds, and to another once that member is gone; the
// log's fence keeps two activations from ever writing it.
type childGrain struct{ n *Node }

// maxChildID bounds the identity of a grain a peer may activate here.
const maxChildID = 128

// grainIdle is how long a child's grain stays active without a start:
// the next lookup activates it again, so idle grains do not pile up.
const grainIdle = 5 * time.Minute

func (g childGrain) Receive(ctx actor.Context) {
	var m *messages.RemoteStart
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.SetReceiveTimeout(g.n.grainIdle)
		return
	case *actor.ReceiveTimeout:
		ctx.Stop(ctx.Self())
		return
	case *messages.RemoteStart:
		m = msg
	default:
		return // the rest of its lifecycle, and nothing a peer may send it (K3)
	}
	if ctx.Sender() == nil {
		return // nobody to answer
	}
	id := cluster.GetClusterIdentity(ctx).GetIdentity()
	if m.GetContinueSession() != id && !(m.GetContinuable() && m.GetContinueSession() == "" && m.GetRunId() == id) {
		ctx.Request(ctx.Sender(), &messages.RemoteRefused{RunId: m.GetRunId(), Code: clusterwire.RefusedInvalid,
			Reason: fmt.Sprintf("a start that is not of child %q sent to its grain", id)})
		return
	}
	ctx.Forward(g.n.host) // the host answers the caller itself
}

// grainKind is true of kind when it is one of this node's providers'
// kinds, which a peer may ask it to activate a grain of.
func (n *Node) grainKind(kind string) bool {
	name, ok := strings.CutPrefix(kind, kindPrefix)
	return ok && n.provider(name) != nil
}

// homeWait bounds Home's identity lookup: a home member that died and is
// still listed does not answer, and placement goes on without it.
const homeWait = time.Second

// Home returns the grain of the continuable child of provider: the member
// the cluster's identity lookup names for it activates it if it is not
// active yet. A start or resume of that child sent to the grain is run by
// that member, as one sent to its host. ok is false when no live member
// offers the provider or the lookup had no answer within a second or
// before ctx ended.
func (n *Node) Home(ctx context.Context, provider, child string) (pid *actor.PID, ok bool) {
	found := make(chan *actor.PID, 1)
	go func() { found <- n.cl.Get(child, kindPrefix+provider) }()
	select {
	case pid = <-found:
		return pid, pid != nil
	case <-time.After(homeWait):
	case <-ctx.Done():
	}
	return nil, false
}
