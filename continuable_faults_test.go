package subactor_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	delegatetool "github.com/subactor/subactor/tools/delegate"
)

// wrapped is a provider over spawn whose starts can wait at a gate (until
// released or cancelled) and whose runs can hide Steer, as an ACP child's
// cannot steer.
type wrapped struct {
	subagent.Provider
	gate      chan struct{} // nil: no gate
	entered   chan struct{} // told when a start is at the gate
	hideSteer bool
}

func (w *wrapped) wait(ctx context.Context) error {
	if w.gate == nil {
		return nil
	}
	select {
	case w.entered <- struct{}{}:
	default:
	}
	select {
	case <-w.gate:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (w *wrapped) wrap(run subagent.Run, err error) (subagent.Run, error) {
	if err != nil || !w.hideSteer {
		return run, err
	}
	return plainRun{run}, nil
}

func (w *wrapped) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	return w.wrap(w.Provider.Start(ctx, scope, req))
}

func (w *wrapped) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	if err := w.wait(ctx); err != nil {
		return nil, err
	}
	return w.wrap(w.Provider.(subagent.Resumer).Resume(ctx, scope, req))
}

// plainRun hides every optional method of a run (Steer among them).
type plainRun struct{ subagent.Run }

// register registers a wrapped spawn provider named name in e.
func (e continuableEnv) register(t *testing.T, name string, model agent.Model, w *wrapped) {
	t.Helper()
	p, err := spawn.New(spawn.Config{Name: name, System: e.rt.System, Store: e.rt.Store, Model: model, Tools: []agent.Tool{noop{}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Provider = p
	release, err := e.rt.Service.RegisterProvider(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

// messagesOf is the text of the child's model-visible records and the
// kinds of all its records, in log order.
func messagesOf(t *testing.T, store persistence.Store, childID string) (texts, kinds []string) {
	t.Helper()
	_, recs, err := store.Load(testkit.Ctx(t), childID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
		if r.Kind == persistence.KindMessage {
			var m agent.Message
			if err := json.Unmarshal(r.Data, &m); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, subagent.TextOf(m.Content))
		}
	}
	return texts, kinds
}

// Contract S8 (issue 16, fault 1): only the parent that started a
// continuable child may send it follow-ups: an intruder's is refused,
// whether the child is live or idle, and nothing of it is stored or
// started.
func TestS8_AnIntrudersFollowUpIsRefusedAndStoresNothing(t *testing.T) {
	e := newContinuable(t, waitFor{want: []string{"first", "owner's"}})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := e.rt.NewAgent(testkit.Ctx(t), "intruder")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Service.SendMessage(testkit.Ctx(t), intruder, c.ChildID, text("evil live"), "intruder"); !errors.Is(err, registry.ErrNotContinuable) {
		t.Fatalf("an intruder's follow-up to a live child: %v, want ErrNotContinuable", err)
	}
	if d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("owner's"), "user"); err != nil || d.Route != registry.Steered {
		t.Fatalf("the owner's follow-up: %+v, %v", d, err)
	}
	if done := e.collect(t, c.Task.ID); subagent.TextOf(done.Result.Output) != "first,owner's" {
		t.Fatalf("the activation %+v", done)
	}
	if _, err := e.rt.Service.SendMessage(testkit.Ctx(t), intruder, c.ChildID, text("evil idle"), "intruder"); !errors.Is(err, registry.ErrNotContinuable) {
		t.Fatalf("an intruder's follow-up to an idle child: %v, want ErrNotContinuable", err)
	}
	texts, _ := messagesOf(t, e.rt.Store, c.ChildID)
	for _, tx := range texts {
		if strings.Contains(tx, "evil") {
			t.Fatalf("the intruder's message is in the child's log: %q", texts)
		}
	}
	if list, err := e.mgr.List(testkit.Ctx(t), "intruder"); err != nil || len(list) != 0 {
		t.Fatalf("the intruder's tasks %+v, %v", list, err)
	}
}

// Contract S8 (issue 16, fault 2): a one-shot child, even the parent's
// own and live, takes no follow-ups: its session is not resumed under it.
func TestS8_AOneShotChildTakesNoFollowUps(t *testing.T) {
	e := newContinuable(t, waitFor{want: []string{"never sent"}})
	run, err := e.rt.Service.Start(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("one-shot")})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Dispose(context.Background())
	if _, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, run.SessionID(), text("hello"), "user"); !errors.Is(err, registry.ErrNotContinuable) {
		t.Fatalf("a follow-up to a live one-shot child: %v, want ErrNotContinuable", err)
	}
	if list, _ := e.mgr.List(testkit.Ctx(t), "parent"); len(list) != 0 {
		t.Fatalf("a follow-up to a one-shot child started tasks: %+v", list)
	}
}

// blockFirst blocks its model call while the newest user message is
// "first", until cancelled; otherwise it answers with the user messages.
type blockFirst struct{ entered chan struct{} }

func (b blockFirst) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	var users []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			users = append(users, subagent.TextOf(m.Content))
		}
	}
	if users[len(users)-1] == "first" {
		select {
		case b.entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return agent.Response{}, context.Cause(ctx)
	}
	return agent.Response{Message: agent.Message{Content: text(strings.Join(users, ","))}}, nil
}

// Contract S8 (issue 16, fault 3): a follow-up waiting for admission when
// its activation is killed is not lost and does not start the next
// activation while the killed one runs: the killed activation's stop is in
// the log before the next activation takes it, and the follow-up is the
// next activation's prompt, delivered once.
func TestS8_AFollowUpWaitingWhileItsActivationIsKilledStartsTheNextAfterIt(t *testing.T) {
	model := blockFirst{entered: make(chan struct{}, 1)}
	e := newContinuable(t, model)
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, model.entered, "the first activation's model call")
	type sent struct {
		d   registry.Delivery
		err error
	}
	out := make(chan sent, 1)
	go func() {
		d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("late"), "user")
		out <- sent{d, err}
	}()
	if _, err := e.mgr.Kill(testkit.Ctx(t), "parent", c.Task.ID); err != nil {
		t.Fatal(err)
	}
	got := testkit.Recv(t, out, "the follow-up's delivery")
	if got.err != nil || got.d.Route != registry.Started {
		t.Fatalf("the follow-up: %+v, %v (want started)", got.d, got.err)
	}
	if first := e.collect(t, c.Task.ID); first.State != tasks.Killed {
		t.Fatalf("the killed activation %+v", first)
	}
	if next := e.collect(t, got.d.Task.ID); subagent.TextOf(next.Result.Output) != "first,late" {
		t.Fatalf("the next activation %+v", next)
	}
	texts, kinds := messagesOf(t, e.rt.Store, c.ChildID)
	stop, take := slices.Index(kinds, agentlog.KindStop), slices.Index(kinds, agentlog.KindActivation)
	if stop < 0 || take < 0 || stop > take {
		t.Fatalf("log kinds %q: the killed activation's stop must come before the next activation takes the log", kinds)
	}
	if n := strings.Count(strings.Join(texts, "\n"), "late"); n != 2 { // the prompt, and the answer quoting it
		t.Fatalf("log %q: the follow-up must be delivered once", texts)
	}
}

// eventLog records a parent's run events in order.
type eventLog struct {
	mu     sync.Mutex
	events []subagent.Event
}

func (l *eventLog) listen(ev subagent.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	return nil
}

// Contract S8 (issue 16, fault 4): a follow-up racing a finishing
// activation is either steered into it or starts the next one only once
// the previous run ended and its task is terminal: never two running
// tasks for one child, never the next start before the previous end.
func TestS8_AFollowUpRacingAFinishingActivationStartsTheNextOnlyAfterIt(t *testing.T) {
	e := newContinuable(t, waitFor{})
	events := &eventLog{}
	sub := e.rt.Service.ListenParent("parent", events.listen)
	defer sub.Release()
	for range 20 {
		c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("second"), "user")
		if err != nil {
			t.Fatal(err)
		}
		if d.Route == registry.Started {
			if prev, err := e.mgr.Get(testkit.Ctx(t), "parent", c.Task.ID); err != nil || !prev.State.Terminal() {
				t.Fatalf("the next activation started while the previous task was %+v, %v", prev, err)
			}
			e.collect(t, d.Task.ID)
		}
		e.collect(t, c.Task.ID)
	}
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	live := map[string]string{} // child session -> its live run
	for _, ev := range events.events {
		switch ev := ev.(type) {
		case subagent.RunStarted:
			if run, ok := live[ev.SessionID]; ok {
				t.Fatalf("run %s of child %s started while run %s was live", ev.RunID, ev.SessionID, run)
			}
			live[ev.SessionID] = ev.RunID
		case subagent.RunEnded:
			delete(live, ev.SessionID)
		}
	}
}

// Contract S8 (issue 16, fault 5): for a provider whose runs cannot steer,
// a follow-up sent once the task reads completed starts the next
// activation; it is never refused because the route still held the ended
// run.
func TestS8_AFollowUpAfterACompletedUnsteerableActivationStartsTheNext(t *testing.T) {
	e := newContinuable(t, waitFor{})
	e.register(t, "unsteerable", waitFor{}, &wrapped{hideSteer: true})
	for range 20 {
		c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), "unsteerable", subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
		if err != nil {
			t.Fatal(err)
		}
		if done := e.collect(t, c.Task.ID); done.State != tasks.Completed {
			t.Fatalf("first activation %+v", done)
		}
		d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("next"), "user")
		if err != nil || d.Route != registry.Started {
			t.Fatalf("a follow-up after the task completed: %+v, %v", d, err)
		}
		e.collect(t, d.Task.ID)
	}
}

// Contracts S7, S5 (issue 16, fault 7): Service.Close cancels an
// activation whose provider start is pending: StartContinuable fails, the
// task ends killed, and no activation is published after the close.
func TestS7_CloseCancelsAnActivationWhoseStartIsPending(t *testing.T) {
	e := newContinuable(t, waitFor{})
	gated := &wrapped{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	e.register(t, "gated", waitFor{}, gated)
	type started struct {
		c   registry.Continuable
		err error
	}
	out := make(chan started, 1)
	go func() {
		c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), "gated", subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
		out <- started{c, err}
	}()
	testkit.Recv(t, gated.entered, "the provider's start")
	e.rt.Service.Close()
	got := testkit.Recv(t, out, "StartContinuable after the close")
	if got.err == nil {
		t.Fatalf("StartContinuable published %+v after the Service closed", got.c)
	}
	list, err := e.mgr.List(testkit.Ctx(t), "parent")
	if err != nil || len(list) != 1 || list[0].State != tasks.Killed {
		t.Fatalf("the activation's task %+v, %v: want one, killed", list, err)
	}
	if kids, err := e.rt.Store.Children(testkit.Ctx(t), "parent"); err != nil || len(kids) != 0 {
		t.Fatalf("children left in the store: %+v, %v", kids, err)
	}
}

// refusingTasks is a task store that refuses every record.
type refusingTasks struct{ persistence.TaskStore }

func (refusingTasks) PutTask(context.Context, persistence.TaskRecord) error {
	return errors.New("task store full")
}

// countingModel counts its calls and answers at once.
type countingModel struct {
	mu    sync.Mutex
	calls int
}

func (m *countingModel) Generate(context.Context, agent.Request) (agent.Response, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	return agent.Response{Message: agent.Message{Content: text("done")}}, nil
}

// Contracts S7, S5, R6 (issue 16, fault 8): a continuable start that
// fails leaves nothing: a task store that refuses the record starts no
// child (no session, no model call); a context that ends while the
// provider starts rolls the child back and ends the task killed.
func TestS7_AFailedContinuableStartLeavesNoChild(t *testing.T) {
	t.Run("task store refuses", func(t *testing.T) {
		model := &countingModel{}
		e := newContinuable(t, model)
		store := e.rt.Store.(persistence.TaskStore)
		mgr := tasks.New(e.rt.System, refusingTasks{store})
		t.Cleanup(func() { _ = mgr.Close(context.Background()) })
		svc := registry.New(e.rt.System, registry.WithTasks(mgr))
		t.Cleanup(svc.Close)
		release, err := svc.RegisterProvider(e.rt.Provider)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := svc.StartContinuable(testkit.Ctx(t), e.rt.Provider.Name(), subagent.StartRequest{Parent: e.parent, Prompt: text("x")}); err == nil {
			t.Fatal("StartContinuable succeeded with a task store that refuses records")
		}
		if kids, err := e.rt.Store.Children(testkit.Ctx(t), "parent"); err != nil || len(kids) != 0 {
			t.Fatalf("children in the store: %+v, %v", kids, err)
		}
		model.mu.Lock()
		defer model.mu.Unlock()
		if model.calls != 0 {
			t.Fatalf("the child made %d model calls", model.calls)
		}
	})
	t.Run("context ends during the start", func(t *testing.T) {
		e := newContinuable(t, waitFor{})
		gated := &wrapped{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
		e.register(t, "gated", waitFor{}, gated)
		ctx, cancel := context.WithCancel(testkit.Ctx(t))
		out := make(chan error, 1)
		go func() {
			_, err := e.rt.Service.StartContinuable(ctx, "gated", subagent.StartRequest{Parent: e.parent, Prompt: text("x")})
			out <- err
		}()
		testkit.Recv(t, gated.entered, "the provider's start")
		cancel()
		if err := testkit.Recv(t, out, "StartContinuable"); !errors.Is(err, context.Canceled) {
			t.Fatalf("StartContinuable: %v, want its context's error", err)
		}
		list, err := e.mgr.List(testkit.Ctx(t), "parent")
		if err != nil || len(list) != 1 || list[0].State != tasks.Killed {
			t.Fatalf("the activation's task %+v, %v: want one, killed", list, err)
		}
		if kids, err := e.rt.Store.Children(testkit.Ctx(t), "parent"); err != nil || len(kids) != 0 {
			t.Fatalf("children in the store: %+v, %v", kids, err)
		}
	})
}

// onlyStarts is a provider that cannot resume.
type onlyStarts struct{ subagent.Provider }

// Contract T1 (issue 16, fault 9): the delegate tool offers continuable
// children only where they work: a provider that resumes, on a Service
// with a task manager.
func TestT1_ContinuableIsOfferedOnlyWhereItWorks(t *testing.T) {
	e := newContinuable(t, waitFor{})
	if _, err := e.rt.Service.RegisterProvider(onlyStarts{e.rt.Provider}); err == nil {
		t.Fatal("registered a second provider under the default's name")
	}
	plainName := "plain"
	p, err := spawn.New(spawn.Config{Name: plainName, System: e.rt.System, Store: e.rt.Store, Model: waitFor{}})
	if err != nil {
		t.Fatal(err)
	}
	release, err := e.rt.Service.RegisterProvider(onlyStarts{p})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	bare := registry.New(e.rt.System) // no task manager
	defer bare.Close()
	releaseBare, err := bare.RegisterProvider(e.rt.Provider)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBare()
	for _, c := range []struct {
		name     string
		svc      *registry.Service
		provider string
		want     bool
	}{
		{"resumable, with tasks", e.rt.Service, e.provider, true},
		{"not resumable", e.rt.Service, plainName, false},
		{"no task manager", bare, e.rt.Provider.Name(), false},
	} {
		tool := delegatetool.New(delegatetool.Config{Service: c.svc, Provider: c.provider, Tasks: e.mgr})
		spec := string(tool.Spec().Parameters)
		tool.Close()
		if got := strings.Contains(spec, `"continuable"`); got != c.want {
			t.Errorf("%s: continuable offered %v, want %v: %s", c.name, got, c.want, spec)
		}
	}
}

// Contract S4 (issue 16, fault 10): Start refuses a request with a
// Continuation, as its doc says: continuing a child is Resume's.
func TestS4_StartRefusesAContinuation(t *testing.T) {
	e := newContinuable(t, waitFor{})
	_, err := e.rt.Service.Start(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("x"),
		Continuation: &subagent.Continuation{SessionID: "child"}})
	var invalid *subagent.InvalidRequestError
	if !errors.As(err, &invalid) || invalid.Field != "continuation" {
		t.Fatalf("Start with a continuation: %v", err)
	}
}

// Contract T3 (issue 16): closing a parent agent kills its live tasks:
// its continuable child's activation ends, recorded killed.
func TestT3_ClosingAParentKillsItsLiveTasks(t *testing.T) {
	e := newContinuable(t, waitFor{want: []string{"never sent"}})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	e.parent.Close()
	if done := e.collect(t, c.Task.ID); done.State != tasks.Killed || done.Result.Output != nil {
		t.Fatalf("the closed parent's task %+v", done)
	}
	// Collected once recorded: the store says so too.
	if rec, err := e.rt.Store.(persistence.TaskStore).GetTask(testkit.Ctx(t), c.Task.ID); err != nil || rec.State != string(tasks.Killed) {
		t.Fatalf("task record %+v, %v", rec, err)
	}
}

// Contract S8: a follow-up's source is stored with its message as
// attribution (the owner, not the source, authorises it).
func TestS8_AFollowUpsSourceIsStoredWithIt(t *testing.T) {
	e := newContinuable(t, waitFor{})
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), e.provider, subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	e.collect(t, c.Task.ID)
	d, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("next"), "coordinator:abc")
	if err != nil {
		t.Fatal(err)
	}
	e.collect(t, d.Task.ID)
	_, recs, err := e.rt.Store.Load(testkit.Ctx(t), c.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, r := range recs {
		var m agent.Message
		if r.Kind == persistence.KindMessage && json.Unmarshal(r.Data, &m) == nil && m.Role == agent.User {
			sources = append(sources, m.Content[0].Source)
		}
	}
	if !slices.Equal(sources, []string{"", "coordinator:abc"}) {
		t.Fatalf("the child's user messages have sources %q", sources)
	}
}

// Contract S8: a follow-up queued behind an activation that is still
// starting, whose context ends, cancels that activation and returns only
// once it quiesced; the starter's follow-up then fails too (it was never
// logged).
func TestS8_AGivenUpFollowUpCancelsAStartingActivation(t *testing.T) {
	e := newContinuable(t, waitFor{})
	gated := &wrapped{}
	e.register(t, "gated", waitFor{}, gated)
	c, err := e.rt.Service.StartContinuable(testkit.Ctx(t), "gated", subagent.StartRequest{Parent: e.parent, Prompt: text("first")})
	if err != nil {
		t.Fatal(err)
	}
	e.collect(t, c.Task.ID)
	gated.gate, gated.entered = make(chan struct{}), make(chan struct{}, 1) // the next start waits
	starter := make(chan error, 1)
	go func() {
		_, err := e.rt.Service.SendMessage(testkit.Ctx(t), e.parent, c.ChildID, text("starts"), "user")
		starter <- err
	}()
	testkit.Recv(t, gated.entered, "the next activation's start")
	// Ample time to be queued behind the start (no event tells it is),
	// then it gives up.
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 2*time.Second)
	defer cancel()
	queued := make(chan error, 1)
	go func() {
		_, err := e.rt.Service.SendMessage(ctx, e.parent, c.ChildID, text("queued"), "user")
		queued <- err
	}()
	if err := testkit.Recv(t, queued, "the given-up follow-up"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the given-up follow-up: %v", err)
	}
	// It returned once the starting activation was gone.
	list, err := e.mgr.List(testkit.Ctx(t), "parent")
	if err != nil || len(list) != 2 || list[1].State != tasks.Killed {
		t.Fatalf("tasks %+v, %v: want the starting activation killed", list, err)
	}
	if err := testkit.Recv(t, starter, "the starter"); err == nil {
		t.Fatal("the starter's follow-up was delivered though its activation was cancelled before it took the log")
	}
	texts, _ := messagesOf(t, e.rt.Store, c.ChildID)
	if slices.Contains(texts, "starts") || slices.Contains(texts, "queued") {
		t.Fatalf("undelivered follow-ups in the log: %q", texts)
	}
}
