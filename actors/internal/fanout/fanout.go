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
// A listener may also be an actor (NewSubTo): its owner sends it each event
// as its protobuf message (package messages) from its own Receive, in the
// order emitted, so the subscriber's mailbox is its queue and its isolation
// (A3). The owner watches it and drops it once it stops; a Flush is
// answered once it has answered an *actor.Touch sent behind the events.
//
// An owner actor (the registry or a parent) holds a Fanout, emits into it
// from its Receive and hands it the Unsubscribe and Flush commands that
// subscriptions send, and the Touched answers its subscribers send back.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package fanout

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/internal/wire"
	"github.com/subactor/subactor/subagent"
)

// DefaultBound is how many events a listener may have outstanding before
// it is detached. A burst of 2,000 runs with start, progress and end fits
// several times over; at ~100 bytes an event it costs at most ~1.6 MB.
const DefaultBound = 16384

// Sub is one listener: a Go function with its queue and delivery
// goroutine, or a subscriber actor sent each event as a message.
type Sub struct {
	l     subagent.Listener
	to    *actor.PID          // the subscriber actor (NewSubTo), or nil
	send  actor.SenderContext // to's owner's context, from Add
	log   *slog.Logger
	bound int
	types map[string]bool // nil delivers every type

	mu       sync.Mutex
	queue    []item
	queued   int  // events (not flush markers) queued or being delivered
	detached bool // overflowed: deliver what is queued, then stop
	wake     chan struct{}

	released atomic.Bool   // no further call may begin
	done     chan struct{} // closed when the delivery goroutine has returned (a subscriber actor's: on release)
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
	s := &Sub{l: l, log: log, bound: bound, wake: make(chan struct{}, 1), done: make(chan struct{}), types: typeSet(types)}
	go s.deliver()
	return s
}

// NewSubTo makes the subscriber actor at to a listener. It has no bound
// of ours and no goroutine: its mailbox is its queue. types, when
// non-empty, are the only event types it is sent.
func NewSubTo(to *actor.PID, log *slog.Logger, types []string) *Sub {
	return &Sub{to: to, log: log, done: make(chan struct{}), types: typeSet(types)}
}

func typeSet(types []string) map[string]bool {
	if len(types) == 0 {
		return nil
	}
	set := make(map[string]bool, len(types))
	for _, t := range types {
		set[t] = true
	}
	return set
}

// Push queues ev for the listener, or sends it to a subscriber actor. It
// returns false once the listener is detached or released: the owner then
// forgets it.
func (s *Sub) Push(ev subagent.Event) bool {
	if s.to != nil {
		s.sendTo(ev)
		return true // forgotten on its Unsubscribe or Drop, which unwatch it
	}
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

// sendTo sends ev to the subscriber actor as its protobuf message, from
// the owner's Receive.
func (s *Sub) sendTo(ev subagent.Event) {
	if s.released.Load() || s.types != nil && !s.types[subagent.TypeOf(ev)] {
		return
	}
	m, err := wire.FromEvent(ev)
	if err != nil {
		s.log.Error("subagent: event not sent to its subscriber", "event", subagent.TypeOf(ev), "err", err)
		return
	}
	s.send.Send(s.to, m)
}

// Release stops delivery at once: no call of the listener begins after it
// returns, and it never waits for the listener's code. It reports whether
// this call released it, so that of a caller's Release and an owner's drop
// of a stopped subscriber only one counts the subscription gone.
func (s *Sub) Release() bool {
	first := !s.released.Swap(true)
	if s.to == nil {
		s.signal()
	} else if first {
		close(s.done)
	}
	return first
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
type Fanout struct {
	subs []*Sub
	// touches are the flushes of subscriber actors waiting for their
	// answer to a Touch, in the order the Touches were sent.
	touches []touch
}

type touch struct {
	to     *actor.PID
	marker chan struct{}
}

// Add subscribes s; c is the owner's context, which watches a subscriber
// actor and sends it its events.
func (f *Fanout) Add(c actor.Context, s *Sub) {
	if s.to != nil {
		s.send = c
		c.Watch(s.to)
	}
	f.subs = append(f.subs, s)
}

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
		f.forget(s) // a function's: a subscriber actor's Push keeps it
	}
}

// Handle carries out an Unsubscribe or Flush, or takes a subscriber
// actor's answer to a flush's Touch; false when msg is none of them.
func (f *Fanout) Handle(c actor.Context, msg any) bool {
	switch m := msg.(type) {
	case *Unsubscribe:
		f.remove(c, m.Sub)
	case *Flush:
		if m.Sub.to == nil {
			m.Sub.PushFlush(m.Marker)
		} else if m.Sub.released.Load() {
			close(m.Marker)
		} else {
			// Behind every event sent before it: the answer means the
			// subscriber has handled them.
			f.touches = append(f.touches, touch{m.Sub.to, m.Marker})
			c.Request(m.Sub.to, &actor.Touch{})
		}
	case *actor.Touched:
		i := slices.IndexFunc(f.touches, func(t touch) bool { return t.to.Equal(m.Who) })
		if i < 0 {
			return false
		}
		close(f.touches[i].marker)
		f.touches = slices.Delete(f.touches, i, i+1)
	default:
		return false
	}
	return true
}

// Drop forgets the subscriber actor at who, which stopped: every
// subscription of it is released and its flushes end. It returns how many
// subscriptions this released (their caller's Release may have come
// first).
func (f *Fanout) Drop(who *actor.PID) (released int) {
	f.subs = slices.DeleteFunc(f.subs, func(s *Sub) bool {
		if s.to == nil || !s.to.Equal(who) {
			return false
		}
		if s.Release() {
			released++
		}
		return true
	})
	f.endTouches(who)
	return released
}

// Close releases every listener and stops watching the subscriber actors:
// the owner is stopping.
func (f *Fanout) Close(c actor.Context) {
	for _, s := range f.subs {
		s.Release()
		if s.to != nil {
			c.Unwatch(s.to)
		}
	}
	f.subs = nil
	for _, t := range f.touches {
		close(t.marker)
	}
	f.touches = nil
}

func (f *Fanout) forget(s *Sub) bool {
	i := slices.Index(f.subs, s)
	if i >= 0 {
		f.subs = slices.Delete(f.subs, i, i+1)
	}
	return i >= 0
}

func (f *Fanout) remove(c actor.Context, s *Sub) {
	if f.forget(s) && s.to != nil && !slices.ContainsFunc(f.subs, func(o *Sub) bool { return o.to != nil && o.to.Equal(s.to) }) {
		c.Unwatch(s.to)
		f.endTouches(s.to)
	}
}

// endTouches ends the flushes waiting for the subscriber at pid.
func (f *Fanout) endTouches(pid *actor.PID) {
	f.touches = slices.DeleteFunc(f.touches, func(t touch) bool {
		if t.to.Equal(pid) {
			close(t.marker)
			return true
		}
		return false
	})
}
