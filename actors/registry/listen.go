package registry

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/subagent"
)

// ListenOption configures one listener of Listen or ListenParent:
// ListenBound, OnlyEvents, SendTo.
type ListenOption func(*listenConfig)

// listenConfig is what ListenOptions set.
type listenConfig struct {
	types []string   // when non-empty, the only event types delivered
	bound int        // when positive, the listener's bound instead of the default
	to    *actor.PID // a subscriber actor instead of the Go function
}

func readListen(opts []ListenOption) listenConfig {
	var c listenConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// ListenBound lets this listener have up to n events outstanding (default
// 16384) before it is detached with subagent.ListenerOverflow (E5).
func ListenBound(n int) ListenOption {
	return func(c *listenConfig) { c.bound = n }
}

// OnlyEvents delivers only events of these types (their names, as
// subagent.TypeOf(subagent.RunEnded{})); ListenerOverflow and
// ListenerFailed are always delivered, since they say the stream itself
// broke.
func OnlyEvents(types ...string) ListenOption {
	return func(c *listenConfig) {
		c.types = append(append(c.types, types...), subagent.TypeOf(subagent.ListenerOverflow{}), subagent.TypeOf(subagent.ListenerFailed{}))
	}
}

// SendTo makes the actor at pid the listener, instead of the Go function
// passed (which may be nil): the actor that owns the events (a parent
// session's parent actor for ListenParent, the registry actor for Listen)
// sends it each event straight from its Receive, in order, as the
// protobuf message of package messages (*messages.RunStarted,
// *messages.RunProgress, *messages.RunEnded, *messages.ListenerFailed, and
// for Listen *messages.ProviderAdded and *messages.ProviderRemoved), so
// the subscriber's own mailbox isolates it from its peers and from the
// runs (A3, E3). pid may be remote.
//
// The owner watches the subscriber: once it stops, its subscription ends
// as if released. Release stops delivery; Flush returns once the
// subscriber has handled every event sent before it: it is sent an
// *actor.Touch behind them, which protoactor answers for it (its Receive
// sees the Touch too, and may ignore it). ListenBound does not apply: the
// subscriber's mailbox is its queue, bounded if its Props say so.
func SendTo(pid *actor.PID) ListenOption {
	return func(c *listenConfig) { c.to = pid }
}
