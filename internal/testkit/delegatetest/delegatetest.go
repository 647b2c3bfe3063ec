// Package delegatetest helps tests wait for a delegate tool to learn of its
// provider's registration, which reaches the tool as an asynchronous event.
package delegatetest

import (
	"testing"
	"time"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Following wraps the Service for one tool and reports each provider event
// after the tool's own listener has handled it. Listeners run on goroutines
// of their own, so a second listener of the test's would learn of an event with
// no ordering against the tool's; wrapping the tool's listener is exact.
type Following struct {
	*registry.Service
	handled chan subagent.Event
}

// Follow wraps svc; pass the result as the tool's Service.
func Follow(svc *registry.Service) *Following {
	return &Following{Service: svc, handled: make(chan subagent.Event, 64)}
}

// Listen wraps the tool's listener.
func (f *Following) Listen(l subagent.Listener, opts ...registry.ListenOption) subagent.Subscription {
	return f.Service.Listen(func(ev subagent.Event) error {
		err := l(ev)
		f.handled <- ev
		return err
	}, opts...)
}

// Await returns once the tool has handled want, or fails the test after
// a deadline.
func (f *Following) Await(t testing.TB, want subagent.Event) {
	t.Helper()
	deadline := time.After(testkit.Deadline)
	for {
		select {
		case ev := <-f.handled:
			if ev == want {
				return
			}
		case <-deadline:
			t.Fatalf("waited %s: the tool never handled %#v", testkit.Deadline, want)
		}
	}
}
