// Package fanout delivers events to listeners (E3, E5). Each listener has
// a goroutine of its own and a queue bounded by a count of events, so
// listener code never runs on a seam actor's goroutine: a panicking,
// erroring or blocked listener is logged and delays nobody but itself.
//
// The policy is never to thin a stream silently: a listener that keeps
// within its bound receives every event, in the order its owner emitted
// them; one that falls further behind is detached, and the last thing it
// receives, after what was queued, is a subagent.ListenerOverflow notice.
// Memory per listener is at most its bound of queued events.
//
// An owner actor (the registry or a parent) holds a Fanout, emits into it
// from its Receive and hands it the Unsubscribe and Flush commands that
// subscriptions send.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package fanout

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/subactor/subactor/subagent"
)

// DefaultBound is how many events a listener may have outstanding before
// it is detached. A burst of 2,000 runs with start, progress and end fits
// several times over; at ~100 bytes an event it costs at most ~1.6 MB.
const DefaultBound = 16384

// Sub is one listener's queue and delivery goroutine.
type Sub struct {
	l     subagent.Listener
	log   *slog.Logger
	bound int
	types map[string]bool // nil delivers every type

	mu       sync.Mutex
	queue    []item
	queued   int  // events (not flush markers) queued or being delivered
	detached bool // overflowed: deliver what is queued, then stop
	wake     chan struct{}

	released atomic.Bool   // no further call may begin
	done     chan struct{} // closed when the delivery goroutine has returned
}

// item is an event or a flush marker.
type item struct {
	ev    subagent.Event
	flush chan struct{}
}

// NewSub starts the delivery goroutine of l. bound <= 0 means DefaultBound;
// types, when non-empty, are the only event types l receives.
func NewSub(l subagent.Listener, log *slog.Logger, bound int, types []string) *Sub {
	if bound <= 0 {
		bound = DefaultBound
	}
	s := &Sub{l: l, log: log, bound: bound, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if len(types) > 0 {
		s.types = make(map[string]bool, len(types))
		for _, t := range types {
			s.types[t] = true
		}
	}
	go s.deliver()
	return s
}

// Push queues ev for the listener. It returns false once the listener is
// detached or released: the owner then forgets it.
func (s *Sub) Push(ev subagent.Event) bool {
	if s.types != nil && !s.types[subagent.TypeOf(ev)] {
		return !s.released.Load()
	}
	s.mu.Lock()
	if s.detached || s.released.Load() {
		s.mu.Unlock()
		return false
	}
	if s.queued >= s.bound {
		// The notice goes after what is queued, so the listener learns
		// exactly where its stream ends.
		s.detached = true
		s.queue = append(s.queue, item{ev: subagent.ListenerOverflow{Bound: s.bound}})
		s.mu.Unlock()
		s.log.Warn("subagent: listener fell behind its bound and was detached", "bound", s.bound)
		s.signal()
		return false
	}
	s.queued++
	s.queue = append(s.queue, item{ev: ev})
	s.mu.Unlock()
	s.signal()
	return true
}

// PushFlush queues a marker that is closed once the listener has handled
// everything queued before it (at once when nothing more will be).
func (s *Sub) PushFlush(marker chan struct{}) {
	s.mu.Lock()
	if s.detached || s.released.Load() {
		s.mu.Unlock()
		close(marker)
		return
	}
	s.queue = append(s.queue, item{flush: marker})
	s.mu.Unlock()
	s.signal()
}

// Release stops delivery at once: no call of the listener begins after it
// returns, and it never waits for the listener's code.
func (s *Sub) Release() {
	s.released.Store(true)
	s.signal()
}

// Done is closed once the delivery goroutine has returned.
func (s *Sub) Done() <-chan struct{} { return s.done }

func (s *Sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sub) deliver() {
	defer close(s.done)
	for range s.wake {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for i, it := range batch {
			if s.released.Load() {
				s.closeFlushes(batch[i:])
				return
			}
			if it.flush != nil {
				close(it.flush)
				continue
			}
			s.call(it.ev)
			if _, last := it.ev.(subagent.ListenerOverflow); last {
				return
			}
			s.mu.Lock()
			s.queued--
			s.mu.Unlock()
		}
		if s.released.Load() {
			s.closeFlushes(nil)
			return
		}
	}
}

// closeFlushes closes the flush markers of items and of what is still
// queued: a released Sub delivers nothing more.
func (s *Sub) closeFlushes(items []item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range slices.Concat(items, s.queue) {
		if it.flush != nil {
			close(it.flush)
		}
	}
}

// call runs the listener on one event; its failures are logged only.
func (s *Sub) call(ev subagent.Event) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("subagent: listener panicked", "event", subagent.TypeOf(ev), "panic", p)
		}
	}()
	if err := s.l(ev); err != nil {
		s.log.Warn("subagent: listener failed", "event", subagent.TypeOf(ev), "err", err)
	}
}

// Unsubscribe tells the owner to forget a released Sub.
type Unsubscribe struct{ Sub *Sub }

// Flush asks the owner to queue Marker behind what it emitted to Sub.
type Flush struct {
	Sub    *Sub
	Marker chan struct{}
}

// Fanout is an owner actor's listeners, in subscription order. It is used
// only from the owner's Receive.
type Fanout struct{ subs []*Sub }

// Add subscribes s.
func (f *Fanout) Add(s *Sub) { f.subs = append(f.subs, s) }

// Len is the number of listeners.
func (f *Fanout) Len() int { return len(f.subs) }

// Emit queues ev for every listener, forgetting those that are detached.
func (f *Fanout) Emit(ev subagent.Event) {
	kept := f.subs[:0]
	for _, s := range f.subs {
		if s.Push(ev) {
			kept = append(kept, s)
		}
	}
	clear(f.subs[len(kept):])
	f.subs = kept
}

// EmitTo queues ev for one listener.
func (f *Fanout) EmitTo(s *Sub, ev subagent.Event) {
	if !s.Push(ev) {
		f.remove(s)
	}
}

// Handle carries out an Unsubscribe or Flush; false when msg is neither.
func (f *Fanout) Handle(msg any) bool {
	switch m := msg.(type) {
	case *Unsubscribe:
		f.remove(m.Sub)
	case *Flush:
		m.Sub.PushFlush(m.Marker)
	default:
		return false
	}
	return true
}

// Close releases every listener: the owner is stopping.
func (f *Fanout) Close() {
	for _, s := range f.subs {
		s.Release()
	}
	f.subs = nil
}

func (f *Fanout) remove(s *Sub) {
	if i := slices.Index(f.subs, s); i >= 0 {
		f.subs = append(f.subs[:i], f.subs[i+1:]...)
	}
}
