package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/run"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// parentAgent is a delegating agent as the seam sees it.
type parentAgent struct {
	id    string
	depth int
	max   *int
}

func (a parentAgent) ID() string        { return a.id }
func (a parentAgent) SessionID() string { return "session-" + a.id }
func (a parentAgent) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: a.SessionID(), DelegationDepth: a.depth}
}
func (a parentAgent) Options() subagent.AgentOptions { return subagent.AgentOptions{MaxDepth: a.max} }

var top = parentAgent{id: "top"}

// parentPtr is an agent type whose nil pointer a caller might pass.
type parentPtr struct{ parentAgent }

func request(prompt string) subagent.StartRequest {
	return subagent.StartRequest{Prompt: []subagent.ContentBlock{subagent.Text(prompt)}, Parent: top}
}

// testProvider runs each child on a real run actor. By default the child
// answers its prompt once released, or aborts when cancelled.
type testProvider struct {
	name    string
	caps    subagent.Capabilities
	sys     *actors.System
	local   bool
	starts  atomic.Int32
	release chan struct{}
	// start, when set, replaces the default Start.
	start func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error)
}

func (p *testProvider) Name() string                        { return p.name }
func (p *testProvider) Capabilities() subagent.Capabilities { return p.caps }
func (p *testProvider) InheritsParentContext() bool         { return false }

func (p *testProvider) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	p.starts.Add(1)
	if p.start != nil {
		return p.start(ctx, scope, req)
	}
	return p.spawn(ctx, scope, req, func(ctx context.Context, _ run.Gate) (subagent.Result, error) {
		select {
		case <-p.release:
			return subagent.Result{Output: req.Prompt, StopReason: subagent.Completed}, nil
		case <-ctx.Done():
			return subagent.Result{StopReason: subagent.Aborted, Detail: "cancelled"}, nil
		}
	}), nil
}

func (p *testProvider) spawn(ctx context.Context, scope subagent.Scope, req subagent.StartRequest, body run.Body) run.Run {
	spec := run.Spec{Scope: scope, SessionID: fmt.Sprintf("%s-child-%d", p.name, p.starts.Load()), Ctx: ctx, Body: body}
	if p.local {
		spec.Agent = parentAgent{id: spec.SessionID, depth: subagent.DelegationDepthOf(req.Parent) + 1}
	}
	h := run.Start(p.sys, spec)
	return h
}

type fixture struct {
	sys *actors.System
	svc *registry.Service
}

func newFixture(t *testing.T, opts ...actors.Option) fixture {
	sys := actors.NewSystem(opts...)
	svc := registry.New(sys)
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	return fixture{sys, svc}
}

func (f fixture) provider(t *testing.T, name string, caps subagent.Capabilities) *testProvider {
	p := &testProvider{name: name, caps: caps, sys: f.sys, local: true, release: make(chan struct{})}
	release, err := f.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return p
}

// recorder is a listener that hands events to the test in order.
type recorder chan subagent.Event

func (r recorder) listen(ev subagent.Event) error { r <- ev; return nil }

func (r recorder) next(t *testing.T) subagent.Event {
	t.Helper()
	return testkit.Recv(t, r, "the next event")
}

func allCaps() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// Contract S1.
func TestS1_DuplicateNameFailsLoudly(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "spawn", allCaps())
	_, err := f.svc.RegisterProvider(&testProvider{name: "spawn"})
	if !errors.Is(err, subagent.ErrDuplicateProvider) || !strings.Contains(err.Error(), `"spawn"`) {
		t.Fatalf("duplicate registration: %v", err)
	}
	if _, err := f.svc.RegisterProvider(nil); !errors.Is(err, subagent.ErrInvalidProviderArg) {
		t.Fatalf("nil provider: %v", err)
	}
	if got := f.svc.List(); !slices.Equal(got, []string{"spawn"}) {
		t.Fatalf("List = %v", got)
	}
}

// Contract S1.
func TestS1_ReleaseBlocksNewStartsButNotLiveRuns(t *testing.T) {
	f := newFixture(t)
	p := &testProvider{name: "p", sys: f.sys, local: true, release: make(chan struct{})}
	release, err := f.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.svc.Start(context.Background(), "p", request("still mine"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	release()
	release() // idempotent
	if _, err := f.svc.Start(context.Background(), "p", request("x")); !errors.Is(err, subagent.ErrNoProvider) {
		t.Fatalf("start after release: %v", err)
	}
	close(p.release)
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || subagent.TextOf(res.Output) != "still mine" {
		t.Fatalf("run returned before release was revoked: %+v, %v", res, err)
	}
}

// Contract S1.
func TestS1_StaleReleaseDoesNotRemoveANewRegistration(t *testing.T) {
	f := newFixture(t)
	release, _ := f.svc.RegisterProvider(&testProvider{name: "p"})
	release()
	again := &testProvider{name: "p"}
	release2, err := f.svc.RegisterProvider(again)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	release() // the first handle's release must not touch the second
	if p, ok := f.svc.GetProvider("p"); !ok || p != again {
		t.Fatalf("GetProvider after stale release = %v, %v", p, ok)
	}
}

// Contracts S1, E4.
func TestS1E4_ProviderEventsFollowRegistrationsWhateverTheOrder(t *testing.T) {
	f := newFixture(t)
	releaseA, _ := f.svc.RegisterProvider(&testProvider{name: "a"})
	rec := make(recorder, 8)
	defer f.svc.Listen(rec.listen).Release()
	// A consumer that subscribes late first hears of what is registered.
	if ev := rec.next(t); ev != (subagent.ProviderAdded{Provider: "a"}) {
		t.Fatalf("replayed event %#v", ev)
	}
	releaseB, _ := f.svc.RegisterProvider(&testProvider{name: "b"})
	releaseA()
	releaseB()
	for _, want := range []subagent.Event{
		subagent.ProviderAdded{Provider: "b"},
		subagent.ProviderRemoved{Name: "a"},
		subagent.ProviderRemoved{Name: "b"},
	} {
		if ev := rec.next(t); ev != want {
			t.Fatalf("event %#v, want %#v", ev, want)
		}
	}
	if ev := (subagent.ProviderAdded{}); subagent.TypeOf(ev) != "subagent/provider-added" || subagent.TypeOf(subagent.ProviderRemoved{}) != "subagent/provider-removed" {
		t.Fatal("event wire names changed")
	}
}

// Contract S2.
func TestS2_GetProviderReturnsProviderOrAbsent(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", subagent.Capabilities{})
	if got, ok := f.svc.GetProvider("p"); !ok || got != p {
		t.Fatalf("GetProvider(p) = %v, %v", got, ok)
	}
	if got, ok := f.svc.GetProvider("nope"); ok || got != nil {
		t.Fatalf("GetProvider(nope) = %v, %v", got, ok)
	}
}

// Contract S3.
func TestS3_ListIsInInsertionOrder(t *testing.T) {
	f := newFixture(t)
	var releases []func()
	for _, n := range []string{"c", "a", "b"} {
		r, _ := f.svc.RegisterProvider(&testProvider{name: n})
		releases = append(releases, r)
	}
	if got := f.svc.List(); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Fatalf("List = %v", got)
	}
	releases[1]()
	if got := f.svc.List(); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("List after release = %v", got)
	}
}

// Contract S4.
func TestS4_InvalidRequestsFailTypedBeforeAnyProviderCode(t *testing.T) {
	f := newFixture(t)
	none := f.provider(t, "none", subagent.Capabilities{})
	all := f.provider(t, "all", allCaps())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	neg, two, zero := -1, 2, 0
	empty, blank := "", "  "
	with := func(mod func(*subagent.StartRequest)) subagent.StartRequest {
		r := request("task")
		mod(&r)
		return r
	}
	unsupported := func(cap string) func(error) bool {
		return func(err error) bool {
			var u *rules.UnsupportedError
			return errors.As(err, &u) && u.Capability == cap && errors.Is(err, subagent.ErrUnsupported)
		}
	}
	invalid := func(field string) func(error) bool {
		return func(err error) bool {
			var e *subagent.InvalidRequestError
			return errors.As(err, &e) && e.Field == field && errors.Is(err, subagent.ErrInvalidRequest)
		}
	}
	is := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }
	both := func(a, b func(error) bool) func(error) bool { return func(err error) bool { return a(err) && b(err) } }
	cases := []struct {
		name     string
		ctx      context.Context
		provider string
		req      subagent.StartRequest
		want     func(error) bool
	}{
		{"nil context", nil, "all", request("x"), is(subagent.ErrNilContext)},
		{"cancelled context", cancelled, "all", request("x"), func(err error) bool {
			return errors.Is(err, subagent.ErrCancelled) && errors.Is(err, context.Canceled)
		}},
		{"unknown provider", context.Background(), "ghost", request("x"), is(subagent.ErrNoProvider)},
		{"unsupported output schema", context.Background(), "none", with(func(r *subagent.StartRequest) { r.OutputSchema = json.RawMessage(`{"type":"object"}`) }), unsupported("outputSchema")},
		{"unsupported depth limit", context.Background(), "none", with(func(r *subagent.StartRequest) { r.MaxDepth = &two }), unsupported("depthLimit")},
		{"unsupported tool filter", context.Background(), "none", with(func(r *subagent.StartRequest) { r.ToolFilter = &subagent.ToolFilter{Allow: []string{"x"}} }), unsupported("toolFilter")},
		{"unsupported persona", context.Background(), "none", with(func(r *subagent.StartRequest) { p := "pirate"; r.Persona = &p }), unsupported("persona")},
		{"schema does not compile", context.Background(), "all", with(func(r *subagent.StartRequest) {
			r.OutputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":7}}}`)
		}), invalid("outputSchema")},
		{"schema is not JSON", context.Background(), "all", with(func(r *subagent.StartRequest) { r.OutputSchema = json.RawMessage(`{`) }), invalid("outputSchema")},
		{"schema root not an object", context.Background(), "all", with(func(r *subagent.StartRequest) { r.OutputSchema = json.RawMessage(`{"type":"array"}`) }), invalid("outputSchema")},
		{"negative max depth", context.Background(), "all", with(func(r *subagent.StartRequest) { r.MaxDepth = &neg }), invalid("maxDepth")},
		{"empty tool filter", context.Background(), "all", with(func(r *subagent.StartRequest) { r.ToolFilter = &subagent.ToolFilter{} }), both(invalid("toolFilter"), is(descriptor.ErrFilterEmpty))},
		{"blank tool name", context.Background(), "all", with(func(r *subagent.StartRequest) { r.ToolFilter = &subagent.ToolFilter{Deny: []string{""}} }), both(invalid("toolFilter"), is(descriptor.ErrFilterBlankName))},
		{"duplicate tool names", context.Background(), "all", with(func(r *subagent.StartRequest) {
			r.ToolFilter = &subagent.ToolFilter{Allow: []string{"read", "list"}, Deny: []string{"read"}}
		}), both(invalid("toolFilter"), is(descriptor.ErrFilterDuplicate))},
		{"empty persona", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Persona = &empty }), invalid("persona")},
		{"blank persona", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Persona = &blank }), invalid("persona")},
		{"missing parent", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Parent = nil }), invalid("parent")},
		{"empty prompt", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Prompt = nil }), invalid("prompt")},
		{"continuation without resume", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Continuation = &subagent.Continuation{SessionID: "s"} }), invalid("continuation")},
		{"typed nil parent", context.Background(), "all", with(func(r *subagent.StartRequest) { var p *parentPtr; r.Parent = p }), invalid("parent")},
		{"depth at the cap", context.Background(), "all", with(func(r *subagent.StartRequest) { r.MaxDepth = &zero }), func(err error) bool {
			var d *rules.DepthError
			return errors.As(err, &d) && d.Depth == 0 && d.Max == 0 && errors.Is(err, subagent.ErrDepthExceeded)
		}},
		{"inherited cap", context.Background(), "all", with(func(r *subagent.StartRequest) { r.Parent = parentAgent{id: "deep", depth: 2, max: &two} }), is(subagent.ErrDepthExceeded)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := f.svc.Start(c.ctx, c.provider, c.req)
			if r != nil || err == nil || !c.want(err) {
				t.Fatalf("Start = %v, %v (%T)", r, err, err)
			}
		})
	}
	if n := none.starts.Load() + all.starts.Load(); n != 0 {
		t.Fatalf("provider code ran %d times for invalid requests", n)
	}
}

// Contract S4.
func TestS4_StartReturnsARunOnceTheChildIsReady(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	persona := "terse"
	req := request("hello")
	req.Persona = &persona
	req.OutputSchema = json.RawMessage(`{"type":"object"}`)
	req.ToolFilter = &subagent.ToolFilter{Deny: []string{"write"}}
	r, err := f.svc.Start(context.Background(), "p", req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	if r.SessionID() != "p-child-1" || r.ID() == "" || r.ID() == r.SessionID() || r.LocalAgent() == nil || p.starts.Load() != 1 {
		t.Fatalf("run %q session %q agent %v starts %d", r.ID(), r.SessionID(), r.LocalAgent(), p.starts.Load())
	}
}

// setupRecorder is a provider whose setup creates resources (a run actor
// and a scratch goroutine) and waits for its context: on cancellation it must
// release every one of them before returning its error (R6).
type setupRecorder struct {
	testProvider
	entered  chan struct{}
	live     atomic.Int32
	released atomic.Int32
}

func (p *setupRecorder) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	h := p.spawn(ctx, scope, req, func(ctx context.Context, _ run.Gate) (subagent.Result, error) {
		<-ctx.Done()
		return subagent.Result{StopReason: subagent.Aborted}, nil
	})
	p.live.Add(1)
	scratch, scratchDone := make(chan struct{}), make(chan struct{})
	go func() { <-scratch; p.live.Add(-1); close(scratchDone) }()
	close(p.entered)
	<-ctx.Done()
	close(scratch)
	<-scratchDone // a provider quiesces what it started before it answers
	if err := h.Dispose(context.Background()); err != nil {
		return nil, err
	}
	p.released.Add(1)
	return nil, ctx.Err()
}

// Contract S5.
func TestS5_ContextCancelledDuringSetupLeavesNothingBehind(t *testing.T) {
	// No idle parent actor is kept, so every actor counts.
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithIdleParents(0))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	actorsBefore := testkit.LiveActors(f.sys)
	goroutines := goleak.IgnoreCurrent()
	p := &setupRecorder{testProvider: testProvider{name: "slow", sys: f.sys}, entered: make(chan struct{})}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		r, err := f.svc.Start(ctx, "slow", request("x"))
		if r != nil {
			err = errors.New("a run escaped a cancelled start")
		}
		done <- err
	}()
	testkit.Recv(t, p.entered, "the provider's setup")
	cancel()
	err := testkit.Recv(t, done, "Start to return")
	if !errors.Is(err, subagent.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Start error = %v", err)
	}
	if p.live.Load() != 0 || p.released.Load() != 1 {
		t.Fatalf("setup resources left: live %d released %d", p.live.Load(), p.released.Load())
	}
	f.svc.List() // the parent actor's retirement went through the registry
	if n := testkit.LiveActors(f.sys); n != actorsBefore {
		t.Fatalf("live actors %d, want %d", n, actorsBefore)
	}
	if err := goleak.Find(goroutines, testkit.DeadLetters); err != nil {
		t.Fatal(err)
	}
}

// Contract S5.
func TestS5_RunReturnedAfterCancellationIsDisposedNotPublished(t *testing.T) {
	rec := make(recorder, 8)
	f := newFixture(t)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	ctx, cancel := context.WithCancel(context.Background())
	var handle run.Run
	p := &testProvider{name: "late", sys: f.sys, release: make(chan struct{})}
	p.start = func(_ context.Context, _ subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		// A provider that finishes setup although its context ended.
		handle = p.spawn(context.Background(), subagent.Scope{}, req, func(ctx context.Context, _ run.Gate) (subagent.Result, error) {
			<-ctx.Done()
			return subagent.Result{StopReason: subagent.Aborted}, nil
		})
		cancel()
		return handle, nil
	}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	r, err := f.svc.Start(ctx, "late", request("x"))
	if r != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, %v", r, err)
	}
	res, _ := handle.Wait(testkit.Ctx(t))
	if res.StopReason != subagent.Aborted {
		t.Fatalf("unpublished run not cancelled: %v", res.StopReason)
	}
	// A marker run proves no start event was emitted for the escaped one.
	p.start = nil
	close(p.release)
	m, err := f.svc.Start(context.Background(), "late", request("marker"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Dispose(testkit.Ctx(t)) }()
	if ev := rec.next(t).(subagent.RunStarted); ev.RunID != m.ID() {
		t.Fatalf("first event is for %q, not the marker %q", ev.RunID, m.ID())
	}
}

// Contract S5.
func TestS5_CancelAfterPublicationSettlesNonCompleted(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "p", allCaps())
	ctx, cancel := context.WithCancel(context.Background())
	r, err := f.svc.Start(ctx, "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	cancel()
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("cancelled run = %+v, %v", res, err)
	}
}

// The start event names the child's task for a person: the first line of
// its prompt, cut at 60 runes.
func TestE2_StartNamesTheTask(t *testing.T) {
	for prompt, want := range map[string]string{
		"  tally src\nall nested folders": "tally src",
		strings.Repeat("é", 70):           strings.Repeat("é", 59) + "…",
		"":                                "",
	} {
		if got := registry.TaskOf([]subagent.ContentBlock{subagent.Text(prompt)}); got != want {
			t.Errorf("task of %q: %q, want %q", prompt, got, want)
		}
	}
}

// Contracts E1, E2.
func TestE1E2_StartPrecedesEndEvenForAnAlreadySettledChild(t *testing.T) {
	f := newFixture(t)
	rec := make(recorder, 8)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	p := &testProvider{name: "quick", sys: f.sys, local: true}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		h := p.spawn(ctx, scope, req, func(context.Context, run.Gate) (subagent.Result, error) {
			return subagent.Result{Output: []subagent.ContentBlock{subagent.Text("early")}, StopReason: subagent.Completed}, nil
		})
		h.Wait(ctx) // settled before Start returns
		return h, nil
	}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	r, err := f.svc.Start(context.Background(), "quick", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	start, ok := rec.next(t).(subagent.RunStarted)
	if !ok {
		t.Fatal("first event is not subagent/start")
	}
	end, ok := rec.next(t).(subagent.RunEnded)
	if !ok {
		t.Fatal("second event is not subagent/end")
	}
	// One run, one id: the events and the run share it.
	if start.RunID == "" || start.RunID != end.RunID || start.RunID != r.ID() {
		t.Fatalf("run ids: start %q end %q run %q", start.RunID, end.RunID, r.ID())
	}
	// The end carries the run's result.
	if res := end.Result; res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "early" {
		t.Fatalf("the end's result %#v", res)
	}
	end.Result = subagent.Result{}
	want := subagent.RunEnded{RunID: r.ID(), Provider: "quick", SessionID: r.SessionID(), Local: true, StopReason: subagent.Completed, LastAssistantMessage: "early"}
	if start != (subagent.RunStarted{RunID: r.ID(), Provider: "quick", SessionID: r.SessionID(), Local: true, Task: "x"}) || !reflect.DeepEqual(end, want) {
		t.Fatalf("events %#v %#v", start, end)
	}
}

// Contract E2.
func TestE2_LocalFlagComesFromTheProvidersAgentNotItsNames(t *testing.T) {
	f := newFixture(t)
	rec := make(recorder, 8)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	// A remote-style run whose id looks like a local session still has no
	// local agent, so it is not local.
	p := f.provider(t, "remote", allCaps())
	p.local = false
	r, err := f.svc.Start(context.Background(), "remote", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	if ev := rec.next(t).(subagent.RunStarted); ev.Local || r.LocalAgent() != nil {
		t.Fatalf("remote run reported local: %#v", ev)
	}
}

// Contract E3.
func TestE3_RunEventsAreScopedToTheDelegatingParent(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, "p", allCaps())
	close(p.release)
	mine, other := make(recorder, 8), make(recorder, 8)
	defer f.svc.ListenParent("session-a", mine.listen).Release()
	defer f.svc.ListenParent("session-b", other.listen).Release()
	for _, parent := range []string{"b", "a"} {
		req := request(parent)
		req.Parent = parentAgent{id: parent}
		r, err := f.svc.Start(context.Background(), "p", req)
		if err != nil {
			t.Fatal(err)
		}
		r.Wait(testkit.Ctx(t))
		r.Dispose(testkit.Ctx(t))
	}
	for _, c := range []struct {
		r    recorder
		want string
	}{{mine, "a"}, {other, "b"}} {
		c.r.next(t)
		if end := c.r.next(t).(subagent.RunEnded); end.LastAssistantMessage != c.want {
			t.Fatalf("listener of %s saw %q", c.want, end.LastAssistantMessage)
		}
	}
	select {
	case ev := <-mine:
		t.Fatalf("extra event %#v", ev)
	default:
	}
}

// Contract A1.
func TestA1_AStartThatPreparedBeforeReleaseProceeds(t *testing.T) {
	f := newFixture(t)
	entered, proceed := make(chan struct{}), make(chan struct{})
	p := &testProvider{name: "p", sys: f.sys, release: make(chan struct{})}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		close(entered)
		<-proceed
		p.start = nil
		return p.Start(ctx, scope, req)
	}
	release, _ := f.svc.RegisterProvider(p)
	type started struct {
		r   subagent.Run
		err error
	}
	done := make(chan started, 1)
	go func() {
		r, err := f.svc.Start(context.Background(), "p", request("first"))
		done <- started{r, err}
	}()
	testkit.Recv(t, entered, "the provider's Start to be entered") // the registry's mailbox has handed out the provider
	release()
	close(proceed)
	s := testkit.Recv(t, done, "the first Start to return")
	if s.err != nil {
		t.Fatalf("a start ordered before the release failed: %v", s.err)
	}
	defer func() { s.r.Dispose(testkit.Ctx(t)) }()
	if _, err := f.svc.Start(context.Background(), "p", request("second")); !errors.Is(err, subagent.ErrNoProvider) {
		t.Fatalf("a start ordered after the release: %v", err)
	}
}

// Contract A2.
func TestA2_PanickingChildSettlesErrorAndEndsTheRunEvent(t *testing.T) {
	f := newFixture(t)
	rec := make(recorder, 4)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	p := &testProvider{name: "boom", sys: f.sys}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		return p.spawn(ctx, scope, req, func(context.Context, run.Gate) (subagent.Result, error) { panic("child bug") }), nil
	}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	r, err := f.svc.Start(context.Background(), "boom", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	if res, _ := r.Wait(testkit.Ctx(t)); res.StopReason != subagent.Error {
		t.Fatalf("stop reason %v", res.StopReason)
	}
	rec.next(t)
	if end := rec.next(t).(subagent.RunEnded); end.StopReason != subagent.Error {
		t.Fatalf("end event %#v", end)
	}
}

// Contract R2.
func TestR2_InfrastructureFaultEndsWithErrorStopReason(t *testing.T) {
	f := newFixture(t)
	rec := make(recorder, 4)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	p := &testProvider{name: "infra", sys: f.sys}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		return p.spawn(ctx, scope, req, func(context.Context, run.Gate) (subagent.Result, error) {
			return subagent.Result{StopReason: subagent.Completed}, errors.New("disk gone")
		}), nil
	}
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	r, _ := f.svc.Start(context.Background(), "infra", request("x"))
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	if _, err := r.Wait(testkit.Ctx(t)); err == nil {
		t.Fatal("infrastructure fault not reported")
	}
	rec.next(t)
	if end := rec.next(t).(subagent.RunEnded); end.StopReason != subagent.Error {
		t.Fatalf("end event %#v", end)
	}
}

// resumer is a provider that can continue a child.
type resumer struct{ testProvider }

func (p *resumer) Resume(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	return p.Start(ctx, scope, subagent.StartRequest{Prompt: []subagent.ContentBlock{subagent.Text("resumed " + req.Continuation.SessionID)}, Parent: req.Parent})
}

// Contract S6.
func TestS6_ResumeDispatchesToAResumerAndIsObservedLikeStart(t *testing.T) {
	f := newFixture(t)
	f.provider(t, "plain", allCaps())
	p := &resumer{testProvider{name: "durable", sys: f.sys, local: true, release: make(chan struct{})}}
	close(p.release)
	release, _ := f.svc.RegisterProvider(p)
	defer release()
	rec := make(recorder, 4)
	defer f.svc.ListenParent(top.SessionID(), rec.listen).Release()
	req := subagent.StartRequest{Parent: top, Continuation: &subagent.Continuation{SessionID: "child-7"}}
	if _, err := f.svc.Resume(context.Background(), "plain", req); !errors.Is(err, subagent.ErrNotResumable) {
		t.Fatalf("resume on a provider that cannot: %v", err)
	}
	if _, err := f.svc.Resume(context.Background(), "durable", request("x")); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Fatalf("resume without continuation: %v", err)
	}
	r, err := f.svc.Resume(context.Background(), "durable", req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Dispose(testkit.Ctx(t)) }()
	res, _ := r.Wait(testkit.Ctx(t))
	if subagent.TextOf(res.Output) != "resumed child-7" {
		t.Fatalf("resumed output %q", subagent.TextOf(res.Output))
	}
	if _, ok := rec.next(t).(subagent.RunStarted); !ok {
		t.Fatal("no start event for a resumed run")
	}
	if _, ok := rec.next(t).(subagent.RunEnded); !ok {
		t.Fatal("no end event for a resumed run")
	}
}

// Contract A1. With no room for another idle parent actor, a new parent
// session gets the oldest idle actor, rebound to it: no actor more, and
// each session's listeners hear only their own runs.
func TestA1_AnIdleParentActorIsRecycledForANewSession(t *testing.T) {
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithIdleParents(1))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	p := f.provider(t, "p", allCaps())
	close(p.release)
	delegate := func(parent string) string {
		req := request("x")
		req.Parent = parentAgent{id: parent}
		r, err := f.svc.Start(context.Background(), "p", req)
		if err != nil {
			t.Fatal(err)
		}
		r.Wait(testkit.Ctx(t))
		r.Dispose(testkit.Ctx(t))
		return r.ID()
	}
	// a's actor, once its listener is released, is the one idle parent.
	subA0 := f.svc.ListenParent("session-a", make(recorder, 4).listen)
	delegate("a")
	subA0.Release()
	f.svc.List() // its Idle handled
	before := testkit.LiveActors(f.sys)
	recB := make(recorder, 4)
	subB := f.svc.ListenParent("session-b", recB.listen) // takes a's actor over
	runB := delegate("b")
	if n := testkit.LiveActors(f.sys); n != before {
		t.Fatalf("%d actors live for b, %d before: a's idle actor was not recycled", n, before)
	}
	recA := make(recorder, 4)
	subA := f.svc.ListenParent("session-a", recA.listen) // b's is busy: a gets a new one
	runA := delegate("a")
	for _, c := range []struct {
		rec recorder
		run string
	}{{recB, runB}, {recA, runA}} {
		if ev, ok := c.rec.next(t).(subagent.RunStarted); !ok || ev.RunID != c.run {
			t.Fatalf("first event %+v, want the start of %s", ev, c.run)
		}
		if ev, ok := c.rec.next(t).(subagent.RunEnded); !ok || ev.RunID != c.run {
			t.Fatalf("second event %+v, want the end of %s", ev, c.run)
		}
	}
	subA.Release()
	subB.Release()
	for _, rec := range []recorder{recA, recB} {
		select {
		case ev := <-rec:
			t.Fatalf("a listener heard another session's event %+v", ev)
		default:
		}
	}
	// Both idle now, under their own session ids: one is kept, the other
	// retired (a rebound actor reporting its old id would stay forever).
	f.svc.List()
	if n := testkit.LiveActors(f.sys); n != before {
		t.Fatalf("%d actors live once both went idle, want %d", n, before)
	}
}

// Contract A1.
func TestA1_ParentActorsAreRetiredOnceIdle(t *testing.T) {
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithIdleParents(10))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	p := f.provider(t, "p", allCaps())
	close(p.release)
	before := testkit.LiveActors(f.sys)
	for i := range 50 {
		req := request("x")
		req.Parent = parentAgent{id: fmt.Sprint("parent-", i)}
		sub := f.svc.ListenParent(req.Parent.SessionID(), make(recorder, 4).listen)
		r, err := f.svc.Start(context.Background(), "p", req)
		if err != nil {
			t.Fatal(err)
		}
		r.Wait(testkit.Ctx(t))
		r.Dispose(testkit.Ctx(t))
		sub.Release()
	}
	// A listener keeps its parent actor alive and still hears new runs.
	rec := make(recorder, 4)
	sub := f.svc.ListenParent("session-kept", rec.listen)
	req := request("y")
	req.Parent = parentAgent{id: "kept"}
	r, _ := f.svc.Start(context.Background(), "p", req)
	r.Wait(testkit.Ctx(t))
	r.Dispose(testkit.Ctx(t))
	if _, ok := rec.next(t).(subagent.RunStarted); !ok {
		t.Fatal("listener of a kept parent missed the start")
	}
	if _, ok := rec.next(t).(subagent.RunEnded); !ok {
		t.Fatal("listener of a kept parent missed the end")
	}
	sub.Release()
	// Retirement goes through the registry's mailbox; a List round trip
	// after it proves the last ParentIdle was handled. The ten most
	// recently idle parents are kept for their agents' next delegation.
	f.svc.List()
	if n := testkit.LiveActors(f.sys); n != before+10 {
		t.Fatalf("%d actors live after every parent went idle, %d before, want 10 kept", n, before)
	}
}

// Contract S7: the first activation of a continuable child is marked in
// its provider's scope, so that the provider stores the child's creation
// before Start returns (follow-ups resume the child from it); a plain
// delegation's is not, and its provider may leave that to the child's
// first turn.
func TestS7_AContinuableChildsFirstActivationIsMarkedInItsScope(t *testing.T) {
	sys := actors.NewSystem()
	mgr := tasks.New(sys, persistence.NewMemory())
	svc := registry.New(sys, registry.WithTasks(mgr))
	t.Cleanup(func() { svc.Close(); mgr.Close(context.Background()); sys.Shutdown() })
	marks := make(chan bool, 2)
	p := &resumer{testProvider{name: "durable", sys: sys, local: true}}
	p.start = func(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
		marks <- scope.Continuable
		return p.spawn(ctx, scope, req, func(context.Context, run.Gate) (subagent.Result, error) {
			return subagent.Result{StopReason: subagent.Completed}, nil
		}), nil
	}
	release, err := svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c, err := svc.StartContinuable(testkit.Ctx(t), "durable", request("first"))
	if err != nil {
		t.Fatal(err)
	}
	if !testkit.Recv(t, marks, "the continuable start's mark") {
		t.Fatal("a continuable child's first activation is not marked continuable")
	}
	if _, err := mgr.Collect(testkit.Ctx(t), top.SessionID(), c.Task.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	r, err := svc.Start(testkit.Ctx(t), "durable", request("plain"))
	if err != nil {
		t.Fatal(err)
	}
	if testkit.Recv(t, marks, "the plain start's mark") {
		t.Fatal("a plain delegation is marked continuable")
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Contract E3: a parent actor exists for listeners only. A run of a
// parent nobody listens to takes none, and its provider is handed no
// event sink (Scope.Events nil); a subscription made while it runs
// hears nothing of it (never an end without its start), and hears the
// next run from start to end; once released, the parent's next run takes
// none again.
func TestE3_ARunOfAParentNobodyListensToTakesNoParentActor(t *testing.T) {
	sys := actors.NewSystem()
	svc := registry.New(sys, registry.WithIdleParents(0))
	t.Cleanup(func() { svc.Close(); sys.Shutdown() })
	f := fixture{sys, svc}
	// The provider is handed a sink only when someone can hear the run.
	p := &sinkRecorder{testProvider{name: "p", caps: allCaps(), sys: sys, local: true, release: make(chan struct{})}, make(chan bool, 3)}
	release, err := f.svc.RegisterProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	before := testkit.LiveActors(f.sys)
	unheard, err := f.svc.Start(context.Background(), "p", request("x"))
	if err != nil {
		t.Fatal(err)
	}
	if n := testkit.LiveActors(f.sys); n != before+1 {
		t.Fatalf("%d actors live beside an unheard run, %d before: want its run actor only", n, before)
	}
	rec := make(recorder, 8)
	sub := f.svc.ListenParent(top.SessionID(), rec.listen)
	heard, err := f.svc.Start(context.Background(), "p", request("y"))
	if err != nil {
		t.Fatal(err)
	}
	close(p.release)
	for _, r := range []subagent.Run{unheard, heard} {
		r.Wait(testkit.Ctx(t))
		r.Dispose(testkit.Ctx(t))
	}
	if ev, ok := rec.next(t).(subagent.RunStarted); !ok || ev.RunID != heard.ID() {
		t.Fatalf("first event %+v, want the start of %s", ev, heard.ID())
	}
	if ev, ok := rec.next(t).(subagent.RunEnded); !ok || ev.RunID != heard.ID() {
		t.Fatalf("second event %+v, want the end of %s", ev, heard.ID())
	}
	if err := sub.Flush(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-rec:
		t.Fatalf("the listener heard %+v of a run started before it subscribed", ev)
	default:
	}
	sub.Release()
	f.svc.List() // the released parent actor retired through the registry
	if n := testkit.LiveActors(f.sys); n != before {
		t.Fatalf("%d actors live once released, %d before", n, before)
	}
	again, err := f.svc.Start(context.Background(), "p", request("z"))
	if err != nil {
		t.Fatal(err)
	}
	if n := testkit.LiveActors(f.sys); n != before+1 {
		t.Fatalf("%d actors live beside a run after the release, %d before: want its run actor only", n, before)
	}
	again.Wait(testkit.Ctx(t))
	again.Dispose(testkit.Ctx(t))
	for i, want := range []bool{false, true, false} {
		if got := testkit.Recv(t, p.sinks, "a start's scope"); got != want {
			t.Fatalf("start %d was handed a sink: %v, want %v", i, got, want)
		}
	}
}

// sinkRecorder is a testProvider that tells, for each start, whether the
// Service handed it an event sink.
type sinkRecorder struct {
	testProvider
	sinks chan bool
}

func (p *sinkRecorder) Start(ctx context.Context, scope subagent.Scope, req subagent.StartRequest) (subagent.Run, error) {
	p.sinks <- scope.Events != nil
	return p.testProvider.Start(ctx, scope, req)
}
