package inline

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// goid is the calling goroutine's id, read from its stack header
// ("goroutine 17 [running]:"), so a test can tell which goroutine handled
// a message.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	return strings.Fields(string(buf[:n]))[1]
}

// event is one call the mailbox made on its invoker.
type event struct {
	kind   string // "user", "system" or "escalate"
	msg    any
	reason any // escalate only
	g      string
}

// fake is an actor.MessageInvoker that records every call, counts calls
// that overlap another (a mailbox must never run two at once) and runs an
// optional behaviour per message after recording it.
type fake struct {
	mb *mailbox

	mu     sync.Mutex
	events []event

	inside   atomic.Bool
	overlaps atomic.Int32

	user     func(msg any)
	system   func(msg any)
	escalate func(reason, msg any)
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{mb: newMailbox().(*mailbox)}
	f.mb.RegisterHandlers(f, actor.NewSynchronizedDispatcher(throughput))
	f.mb.Start()
	t.Cleanup(func() {
		if n := f.overlaps.Load(); n != 0 {
			t.Errorf("%d invocations overlapped another", n)
		}
	})
	return f
}

func (f *fake) enter() {
	if !f.inside.CompareAndSwap(false, true) {
		f.overlaps.Add(1)
	}
}

func (f *fake) leave() { f.inside.Store(false) }

func (f *fake) record(e event) {
	e.g = goid()
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *fake) InvokeUserMessage(msg any) {
	f.enter()
	defer f.leave()
	f.record(event{kind: "user", msg: msg})
	if f.user != nil {
		f.user(msg)
	}
}

func (f *fake) InvokeSystemMessage(msg any) {
	f.enter()
	defer f.leave()
	f.record(event{kind: "system", msg: msg})
	if f.system != nil {
		f.system(msg)
	}
}

func (f *fake) EscalateFailure(reason, msg any) {
	f.enter()
	defer f.leave()
	f.record(event{kind: "escalate", msg: msg, reason: reason})
	if f.escalate != nil {
		f.escalate(reason, msg)
	}
}

func (f *fake) log() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// trace renders the log as "kind:msg" (and "escalate:reason@msg").
func (f *fake) trace() []string {
	var out []string
	for _, e := range f.log() {
		if e.kind == "escalate" {
			out = append(out, fmt.Sprintf("escalate:%v@%v", e.reason, e.msg))
			continue
		}
		out = append(out, fmt.Sprintf("%s:%v", e.kind, e.msg))
	}
	return out
}

func wantTrace(t *testing.T, f *fake, want ...string) {
	t.Helper()
	if got := f.trace(); !slices.Equal(got, want) {
		t.Fatalf("invocations:\n got  %q\n want %q", got, want)
	}
}

func wantCount(t *testing.T, mb *mailbox, want int) {
	t.Helper()
	if got := mb.UserMessageCount(); got != want {
		t.Fatalf("UserMessageCount = %d, want %d", got, want)
	}
}

func TestAnIdleMailboxHandlesOnThePostingGoroutine(t *testing.T) {
	f := newFake(t)
	me := goid()

	f.mb.PostUserMessage("u")
	f.mb.PostSystemMessage("s")
	// Handled before Post returned, on this goroutine.
	wantTrace(t, f, "user:u", "system:s")
	for _, e := range f.log() {
		if e.g != me {
			t.Fatalf("%s:%v handled on goroutine %s, posted on %s", e.kind, e.msg, e.g, me)
		}
	}
	wantCount(t, f.mb, 0)

	// Another goroutine posting to the idle mailbox handles it itself.
	poster := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poster <- goid()
		f.mb.PostUserMessage("from-other")
	}()
	other := testkit.Recv(t, poster, "the other poster's goroutine id")
	testkit.Recv(t, done, "the other poster to return")
	log := f.log()
	if last := log[len(log)-1]; last.msg != "from-other" || last.g != other {
		t.Fatalf("last invocation %v on goroutine %s, want from-other on %s", last.msg, last.g, other)
	}
}

func TestAMessagePostedWhileBusyIsHandledByTheBusyGoroutine(t *testing.T) {
	f := newFake(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	f.user = func(msg any) {
		if msg == "block" {
			close(entered)
			<-release
		}
	}

	handler := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		handler <- goid()
		f.mb.PostUserMessage("block")
	}()
	busy := testkit.Recv(t, handler, "the handling goroutine's id")
	testkit.Recv(t, entered, "the handler to start on block")

	// These return at once, queued for the busy goroutine.
	f.mb.PostUserMessage("queued-1")
	f.mb.PostUserMessage("queued-2")
	f.mb.PostSystemMessage("sys")
	wantTrace(t, f, "user:block")
	wantCount(t, f.mb, 2)

	close(release)
	testkit.Recv(t, done, "the busy goroutine to drain the mailbox")
	wantTrace(t, f, "user:block", "system:sys", "user:queued-1", "user:queued-2")
	for _, e := range f.log() {
		if e.g != busy {
			t.Fatalf("%v handled on goroutine %s, want the busy one %s", e.msg, e.g, busy)
		}
	}
	wantCount(t, f.mb, 0)
}

func TestAReentrantPostIsQueuedAndHandledAfterTheCurrentMessage(t *testing.T) {
	f := newFake(t)
	f.user = func(msg any) {
		if msg != "outer" {
			return
		}
		f.mb.PostUserMessage("inner")
		if got := f.trace(); !slices.Equal(got, []string{"user:outer"}) {
			t.Errorf("inside outer after posting inner, invocations = %q", got)
		}
		if n := f.mb.UserMessageCount(); n != 1 {
			t.Errorf("inside outer, UserMessageCount = %d, want 1", n)
		}
	}
	f.mb.PostUserMessage("outer")
	wantTrace(t, f, "user:outer", "user:inner")
	wantCount(t, f.mb, 0)
}

func TestSystemMessagesGoBeforeUserMessages(t *testing.T) {
	f := newFake(t)
	f.user = func(msg any) {
		switch msg {
		case "start":
			f.mb.PostUserMessage("u1")
			f.mb.PostUserMessage("u2")
			f.mb.PostSystemMessage("s1")
			f.mb.PostSystemMessage("s2")
			// Only user messages count.
			if n := f.mb.UserMessageCount(); n != 2 {
				t.Errorf("UserMessageCount = %d, want 2", n)
			}
		case "u1":
			// A system message posted now overtakes the queued u2.
			f.mb.PostSystemMessage("s3")
		}
	}
	f.system = func(msg any) {
		if msg == "s1" {
			// ...and one posted from a system handler runs before any user message.
			f.mb.PostUserMessage("u3")
			f.mb.PostSystemMessage("s1b")
		}
	}
	f.mb.PostUserMessage("start")
	wantTrace(t, f,
		"user:start",
		"system:s1", "system:s2", "system:s1b",
		"user:u1", "system:s3", "user:u2", "user:u3")
	wantCount(t, f.mb, 0)
}

func TestFIFOWhenTheQueuesOutgrowTheMailbox(t *testing.T) {
	const n = 1000
	f := newFake(t)
	var users, systems []int
	f.user = func(msg any) {
		if msg == "start" {
			for i := range n {
				f.mb.PostUserMessage(i)
				f.mb.PostSystemMessage(i)
			}
			if c := f.mb.UserMessageCount(); c != n {
				t.Errorf("UserMessageCount after queueing %d = %d", n, c)
			}
			return
		}
		users = append(users, msg.(int))
	}
	f.system = func(msg any) { systems = append(systems, msg.(int)) }
	f.mb.PostUserMessage("start")

	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(users, want) {
		t.Fatalf("user messages out of order or lost: got %d, first differences %v", len(users), firstDiff(users, want))
	}
	if !slices.Equal(systems, want) {
		t.Fatalf("system messages out of order or lost: got %d, first differences %v", len(systems), firstDiff(systems, want))
	}
	// All system messages ran before the first queued user message.
	log := f.log()
	if log[1].kind != "system" || log[n].kind != "system" || log[n+1].kind != "user" {
		t.Fatalf("system messages did not all go first: %v, %v, %v", log[1], log[n], log[n+1])
	}
	wantCount(t, f.mb, 0)
}

// Each message i posts 2i+1 and 2i+2, so the queue's head moves while it
// fills, wraps around its end and grows with the head away from slot 0; a
// FIFO queue still hands them out in order 0, 1, 2, ...
func TestFIFOWhenTheQueueWrapsAroundWhileItGrows(t *testing.T) {
	const n = 1000
	f := newFake(t)
	var got []int
	f.user = func(msg any) {
		i := msg.(int)
		got = append(got, i)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				f.mb.PostUserMessage(c)
			}
		}
	}
	f.mb.PostUserMessage(0)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("handled %d messages, first differences %v", len(got), firstDiff(got, want))
	}
	wantCount(t, f.mb, 0)
}

func firstDiff(got, want []int) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %d, want %d", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

func TestRingWrapsBeforeGrowingAndKeepsOrder(t *testing.T) {
	var r ring
	r.push("a")
	r.push("b")
	if m := r.pop(); m != "a" {
		t.Fatalf("pop = %v, want a", m)
	}
	r.push("c") // wraps into slot 0, head at 1
	if r.head != 1 || r.n != 2 || len(r.buf) != 2 {
		t.Fatalf("before growth head=%d n=%d len=%d, want 1, 2, 2", r.head, r.n, len(r.buf))
	}
	r.push("d") // grows with the head away from slot 0
	if len(r.buf) != 4 {
		t.Fatalf("after growth len=%d, want 4", len(r.buf))
	}
	if r.small != [1]any{} {
		t.Fatalf("inline slots still hold %v after growth", r.small)
	}
	var got []any
	for r.n > 0 {
		got = append(got, r.pop())
	}
	if want := []any{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// The ring against a slice, under a fixed sequence of pushes and pops that
// wraps and grows it many times; a popped slot must not keep its message.
func TestRingMatchesASliceQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r ring
	var model []int
	next := 0
	for step := range 20000 {
		// Push more often than pop for a while, then drain, and again.
		pushBias := 6
		if (step/2000)%2 == 1 {
			pushBias = 3
		}
		if len(model) == 0 || rng.IntN(10) < pushBias {
			r.push(next)
			model = append(model, next)
			next++
		} else {
			got := r.pop()
			if got != model[0] {
				t.Fatalf("step %d: pop = %v, want %d", step, got, model[0])
			}
			model = model[1:]
		}
		if r.n != len(model) {
			t.Fatalf("step %d: n = %d, want %d", step, r.n, len(model))
		}
		live := 0
		for _, m := range r.buf {
			if m != nil {
				live++
			}
		}
		if live != r.n {
			t.Fatalf("step %d: %d slots hold a message, %d queued", step, live, r.n)
		}
	}
	for len(model) > 0 {
		if got := r.pop(); got != model[0] {
			t.Fatalf("drain: pop = %v, want %d", got, model[0])
		}
		model = model[1:]
	}
}

func TestSuspendHoldsUserMessagesUntilResume(t *testing.T) {
	f := newFake(t)
	f.mb.PostSystemMessage(&actor.SuspendMailbox{})
	f.mb.PostUserMessage("u1")
	f.mb.PostUserMessage("u2")
	wantTrace(t, f) // nothing: suspend is the mailbox's, not the actor's
	wantCount(t, f.mb, 2)

	// System messages still flow while suspended.
	f.mb.PostSystemMessage("s")
	wantTrace(t, f, "system:s")
	wantCount(t, f.mb, 2)

	f.mb.PostSystemMessage(&actor.ResumeMailbox{})
	wantTrace(t, f, "system:s", "user:u1", "user:u2")
	wantCount(t, f.mb, 0)

	// And it stays resumed.
	f.mb.PostUserMessage("u3")
	wantTrace(t, f, "system:s", "user:u1", "user:u2", "user:u3")
}

func TestSuspendPostedFromAHandlerStopsTheRemainingUserMessages(t *testing.T) {
	f := newFake(t)
	f.user = func(msg any) {
		if msg == "start" {
			f.mb.PostUserMessage("u1")
			f.mb.PostUserMessage("u2")
		}
		if msg == "u1" {
			f.mb.PostSystemMessage(&actor.SuspendMailbox{})
		}
	}
	f.mb.PostUserMessage("start")
	wantTrace(t, f, "user:start", "user:u1")
	wantCount(t, f.mb, 1)

	// Resumed from another goroutine, which then handles what was held.
	poster := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poster <- goid()
		f.mb.PostSystemMessage(&actor.ResumeMailbox{})
	}()
	other := testkit.Recv(t, poster, "the resuming goroutine's id")
	testkit.Recv(t, done, "the resume to return")
	wantTrace(t, f, "user:start", "user:u1", "user:u2")
	if log := f.log(); log[2].g != other {
		t.Fatalf("u2 handled on goroutine %s, want the resuming one %s", log[2].g, other)
	}
	wantCount(t, f.mb, 0)
}

func TestAPanicIsEscalatedAndHandlingGoesOn(t *testing.T) {
	f := newFake(t)
	f.user = func(msg any) {
		switch msg {
		case "boom", "boom-2":
			panic("kaboom:" + msg.(string))
		case "start":
			f.mb.PostUserMessage("boom")
			f.mb.PostUserMessage("after-1")
			f.mb.PostUserMessage("boom-2")
			f.mb.PostUserMessage("after-2")
			f.mb.PostSystemMessage("s-boom")
			f.mb.PostSystemMessage("s-ok")
		}
	}
	f.system = func(msg any) {
		if msg == "s-boom" {
			panic("kaboom:s")
		}
	}

	// A panic on an idle post does not reach the poster...
	f.mb.PostUserMessage("boom")
	wantTrace(t, f, "user:boom", "escalate:kaboom:boom@boom")
	// ...nor leave the mailbox marked busy.
	f.mb.PostUserMessage("next")
	wantTrace(t, f, "user:boom", "escalate:kaboom:boom@boom", "user:next")

	f.mu.Lock()
	f.events = nil
	f.mu.Unlock()
	f.mb.PostUserMessage("start")
	wantTrace(t, f,
		"user:start",
		"system:s-boom", "escalate:kaboom:s@s-boom", "system:s-ok",
		"user:boom", "escalate:kaboom:boom@boom", "user:after-1",
		"user:boom-2", "escalate:kaboom:boom-2@boom-2", "user:after-2")
	me := goid()
	for _, e := range f.log() {
		if e.g != me {
			t.Fatalf("%s:%v on goroutine %s, want the poster %s", e.kind, e.msg, e.g, me)
		}
	}
	wantCount(t, f.mb, 0)
}

// protoactor's EscalateFailure suspends the mailbox (a system message
// posted from inside the escalation) until supervision resumes it.
func TestAnEscalationThatSuspendsHoldsTheRestUntilResume(t *testing.T) {
	f := newFake(t)
	f.user = func(msg any) {
		switch msg {
		case "start":
			f.mb.PostUserMessage("boom")
			f.mb.PostUserMessage("after")
		case "boom":
			panic("kaboom")
		}
	}
	f.escalate = func(any, any) { f.mb.PostSystemMessage(&actor.SuspendMailbox{}) }
	f.mb.PostUserMessage("start")
	wantTrace(t, f, "user:start", "user:boom", "escalate:kaboom@boom")
	wantCount(t, f.mb, 1)

	f.mb.PostSystemMessage("restart")
	f.mb.PostSystemMessage(&actor.ResumeMailbox{})
	wantTrace(t, f, "user:start", "user:boom", "escalate:kaboom@boom", "system:restart", "user:after")
	wantCount(t, f.mb, 0)
}

type posted struct{ poster, seq int }

func TestConcurrentPostersLoseNothingAndKeepTheirOrder(t *testing.T) {
	const posters, each = 8, 1000
	f := newFake(t)
	var (
		next     [posters]int // next user seq expected per poster
		nextSys  [posters]int
		bad      []string
		handlers sync.Map // goroutine ids that handled something
	)
	check := func(kind string, want *[posters]int, msg any) {
		p := msg.(posted)
		if p.seq != want[p.poster] && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("%s from poster %d: seq %d, want %d", kind, p.poster, p.seq, want[p.poster]))
		}
		want[p.poster] = p.seq + 1
		handlers.Store(goid(), true)
	}
	f.user = func(msg any) { check("user", &next, msg) }
	f.system = func(msg any) { check("system", &nextSys, msg) }

	start := make(chan struct{})
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			<-start
			for i := range each {
				f.mb.PostUserMessage(posted{p, i})
				if i%10 == 0 {
					f.mb.PostSystemMessage(posted{p, i / 10})
				}
				if i%7 == 0 {
					// Let the queue run dry now and then, so handling
					// passes from goroutine to goroutine.
					runtime.Gosched()
				}
			}
		})
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	testkit.Recv(t, done, "every poster to return")

	// Every Post has returned, so every message has been handled: whoever
	// was handling drained the mailbox before returning.
	for _, b := range bad {
		t.Error(b)
	}
	for p := range posters {
		if next[p] != each || nextSys[p] != each/10 {
			t.Errorf("poster %d: %d user and %d system messages handled, want %d and %d", p, next[p], nextSys[p], each, each/10)
		}
	}
	users, systems := 0, 0
	for _, e := range f.log() {
		switch e.kind {
		case "user":
			users++
		case "system":
			systems++
		default:
			t.Errorf("unexpected %s", e.kind)
		}
	}
	if users != posters*each || systems != posters*each/10 {
		t.Errorf("handled %d user and %d system messages, want %d and %d", users, systems, posters*each, posters*each/10)
	}
	wantCount(t, f.mb, 0)
	n := 0
	handlers.Range(func(any, any) bool { n++; return true })
	t.Logf("%d goroutines handled messages", n)
}

// The actor behind the Props test. Its record outlives restarts.
type record struct {
	mu      sync.Mutex
	seen    []any
	gids    []string
	stopped chan struct{}
}

type recorder struct{ r *record }

type get struct{}

func (a recorder) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case get:
		a.r.mu.Lock()
		c.Respond(slices.Clone(a.r.seen))
		a.r.mu.Unlock()
		return
	case string:
		if m == "boom" {
			panic("kaboom")
		}
	case *actor.Stopped:
		defer close(a.r.stopped)
	}
	a.r.mu.Lock()
	a.r.seen = append(a.r.seen, c.Message())
	a.r.gids = append(a.r.gids, goid())
	a.r.mu.Unlock()
}

func ask(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) []any {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, get{}, testkit.Deadline).Result()
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return res.([]any)
}

func TestPropsRunsAnActorInlineThroughProtoactor(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	rec := &record{stopped: make(chan struct{})}
	me := goid()
	pid := sys.Root.Spawn(Props(func() actor.Actor { return recorder{rec} }))

	// Started ran on this goroutine before Spawn returned.
	rec.mu.Lock()
	if len(rec.seen) != 1 || rec.gids[0] != me {
		t.Fatalf("after Spawn: seen %v on %v, want Started on %s", rec.seen, rec.gids, me)
	}
	if _, ok := rec.seen[0].(*actor.Started); !ok {
		t.Fatalf("first message %T, want *actor.Started", rec.seen[0])
	}
	rec.mu.Unlock()

	const n = 1000
	for i := range n {
		sys.Root.Send(pid, i)
	}
	got := ask(t, sys, pid)
	if len(got) != n+1 {
		t.Fatalf("actor saw %d messages, want %d", len(got), n+1)
	}
	for i := range n {
		if got[i+1] != i {
			t.Fatalf("message %d is %v, want %d", i+1, got[i+1], i)
		}
	}
	rec.mu.Lock()
	for i, g := range rec.gids {
		if g != me {
			t.Fatalf("message %d (%v) handled on goroutine %s, sent from %s", i, rec.seen[i], g, me)
		}
	}
	rec.mu.Unlock()

	// Many senders: nothing lost, each sender's order kept.
	const senders, each = 8, 250
	start := make(chan struct{})
	var wg sync.WaitGroup
	for p := range senders {
		wg.Go(func() {
			<-start
			for i := range each {
				sys.Root.Send(pid, posted{p, i})
			}
		})
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	testkit.Recv(t, done, "every sender to return")
	var next [senders]int
	for _, m := range ask(t, sys, pid)[n+1:] {
		p := m.(posted)
		if p.seq != next[p.poster] {
			t.Fatalf("sender %d: seq %d, want %d", p.poster, p.seq, next[p.poster])
		}
		next[p.poster]++
	}
	for p, c := range next {
		if c != each {
			t.Fatalf("sender %d: %d messages arrived, want %d", p, c, each)
		}
	}

	// A panic is supervised (restart) and the next message still arrives.
	before := len(ask(t, sys, pid))
	sys.Root.Send(pid, "boom")
	sys.Root.Send(pid, "after")
	tail := ask(t, sys, pid)[before:]
	var kinds []string
	for _, m := range tail {
		kinds = append(kinds, fmt.Sprintf("%T", m))
	}
	if want := []string{"*actor.Restarting", "*actor.Started", "string"}; !slices.Equal(kinds, want) || tail[2] != "after" {
		t.Fatalf("after a panic the actor saw %v (%q), want %v then after", tail, kinds, want)
	}

	// A poison pill is handled after what was sent before it, then stops the actor.
	sys.Root.Send(pid, "last")
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatalf("poison: %v", err)
	}
	testkit.Recv(t, rec.stopped, "the actor's Stopped")
	rec.mu.Lock()
	last := rec.seen[len(rec.seen)-3:]
	rec.mu.Unlock()
	if last[0] != "last" {
		t.Fatalf("before stopping the actor saw %v, want last", last[0])
	}
	if _, ok := last[1].(*actor.Stopping); !ok {
		t.Fatalf("then %T, want *actor.Stopping", last[1])
	}
	if _, ok := last[2].(*actor.Stopped); !ok {
		t.Fatalf("then %T, want *actor.Stopped", last[2])
	}
	if _, err := sys.Root.RequestFuture(pid, get{}, testkit.Deadline).Result(); err == nil {
		t.Fatal("a stopped actor answered")
	}
}

func TestStopThroughProtoactorEndsTheActor(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	rec := &record{stopped: make(chan struct{})}
	pid := sys.Root.Spawn(Props(func() actor.Actor { return recorder{rec} }))
	sys.Root.Send(pid, 1)
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	testkit.Recv(t, rec.stopped, "the actor's Stopped")
	if _, err := sys.Root.RequestFuture(pid, get{}, testkit.Deadline).Result(); err == nil {
		t.Fatal("a stopped actor answered")
	}
}

// A message posted just as the handling goroutine finds the queue empty
// must be handled by one of them: many short bursts, each checked the
// moment its posters return, give that race many chances to strand the
// burst's last message.
func TestTheLastMessageOfABurstIsNeverStranded(t *testing.T) {
	const rounds, posters = 2000, 4
	f := newFake(t)
	var handled atomic.Int64
	f.user = func(any) { handled.Add(1) }
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range posters {
			wg.Go(func() {
				<-start
				f.mb.PostUserMessage(round)
			})
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		testkit.Recv(t, done, "the burst's posters to return")
		if got, want := handled.Load(), int64((round+1)*posters); got != want {
			t.Fatalf("round %d: %d messages handled once every poster returned, want %d (queued: %d)",
				round, got, want, f.mb.UserMessageCount())
		}
	}
}
