// Package inline runs an actor's mailbox on the goroutine that sends to it,
// for the seam's own actors (registry, parent, run). Their Receive never
// blocks and never calls user code that could, so running it inline costs
// the sender a few microseconds and saves a goroutine start and a stack
// growth per scheduled mailbox, the largest cost of a delegation otherwise.
// Listener actors run user code and keep protoactor's default dispatcher.
//
// The mailbox is this package's own rather than protoactor's default one
// on its synchronised dispatcher: that one allocates a queue node per
// message and a closure per scheduling, about a tenth of a delegation's
// allocations. Here the queues are rings that live in the mailbox until
// they outgrow it, under one mutex that is never held while a message is
// handled.
//
// It stays, against protoactor's default dispatcher, because it buys far
// more than the 20% issue 19 asks of a hand-written replacement on the
// end-to-end goals: measured with bench/ (go test -bench, 2000 ops, wall time per op, on the
// shared 2-core machine) with the seam's actors on the default dispatcher
// instead, a delegation through the Service (SubactorSpawn) took 75-121
// µs and 80 allocations, a parent run with one delegation
// (SubactorParentRun) 114-159 µs and 141-144 allocations; with this
// mailbox 42-51 µs and 65 allocations, and 58-64 µs and 106-107
// allocations.
package inline

import (
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// throughput is how many messages one sender handles before it yields
// the processor, as protoactor's dispatchers do.
const throughput = 300

// Props builds props for an actor whose mailbox runs inline.
func Props(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithMailbox(newMailbox))
}

func newMailbox() actor.Mailbox { return &mailbox{} }

// mailbox is an actor.Mailbox whose messages are handled by whichever
// goroutine posts to it while it is idle, system messages first. A
// suspended mailbox (protoactor's supervision, after a failure escalated)
// handles only system messages until it is resumed.
type mailbox struct {
	mu        sync.Mutex
	system    ring
	user      ring
	running   bool // some goroutine is handling messages
	suspended bool
	invoker   actor.MessageInvoker
}

func (m *mailbox) PostUserMessage(msg any)   { m.post(&m.user, msg) }
func (m *mailbox) PostSystemMessage(msg any) { m.post(&m.system, msg) }

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, _ actor.Dispatcher) {
	m.invoker = invoker
}

func (m *mailbox) Start() {}

func (m *mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.n
}

// post queues msg and, when no goroutine is handling this mailbox, handles
// it and whatever arrives meanwhile on the caller's goroutine.
func (m *mailbox) post(q *ring, msg any) {
	m.mu.Lock()
	q.push(msg)
	if m.running {
		m.mu.Unlock()
		return
	}
	m.running = true
	m.mu.Unlock()
	handled := 0
	for m.drain(&handled) {
	}
}

// drain handles messages until none is left to handle, then marks the
// mailbox idle. A panic escaping an actor is escalated to protoactor's
// supervision as its default mailbox does, and drain reports it so the
// caller goes on (the supervisor's suspend and restart arrive as system
// messages).
func (m *mailbox) drain(handled *int) (panicked bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for {
		if *handled++; *handled > throughput {
			*handled = 0
			runtime.Gosched()
		}
		m.mu.Lock()
		if m.system.n > 0 {
			msg = m.system.pop()
			m.mu.Unlock()
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.setSuspended(true)
			case *actor.ResumeMailbox:
				m.setSuspended(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended || m.user.n == 0 {
			m.running = false
			m.mu.Unlock()
			return false
		}
		msg = m.user.pop()
		m.mu.Unlock()
		m.invoker.InvokeUserMessage(msg)
	}
}

func (m *mailbox) setSuspended(s bool) {
	m.mu.Lock()
	m.suspended = s
	m.mu.Unlock()
}

// ring is a FIFO queue whose first slot lives in the mailbox itself: an
// inline mailbox rarely holds more than a message at once, and every
// parked child keeps one (issue 11).
type ring struct {
	small   [1]any
	buf     []any // small[:] until it outgrows it
	head, n int
}

func (r *ring) push(msg any) {
	if r.buf == nil {
		r.buf = r.small[:]
	}
	if r.n == len(r.buf) {
		grown := make([]any, 2*len(r.buf))
		for i := range r.n {
			grown[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		clear(r.buf)
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = msg
	r.n++
}

func (r *ring) pop() any {
	msg := r.buf[r.head]
	r.buf[r.head] = nil // let the message be collected
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 && len(r.buf) > 64 {
		r.buf, r.head = r.small[:], 0 // a burst's buffer is not kept for the actor's life
	}
	return msg
}
