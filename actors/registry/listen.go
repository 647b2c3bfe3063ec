package registry

import "github.com/subactor/subactor/subagent"

// ListenOption configures one listener of Listen or ListenParent:
// ListenBound, OnlyEvents.
type ListenOption func(*listenConfig)

// listenConfig is what ListenOptions set.
type listenConfig struct {
	types []string // when non-empty, the only event types delivered
	bound int      // when positive, the listener's bound instead of the default
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
