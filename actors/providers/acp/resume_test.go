package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Contract D1 (ACP): with a Store, Start writes the child's descriptor as
// the first record of a session named by the run id, whose header names
// the parent; its provider data keeps the agent's session id, whether the
// agent can load sessions, and the directory.
func TestP3_DescriptorKeepsTheAgentSession(t *testing.T) {
	sys := newSystem(t)
	store := persistence.NewMemory()
	cfg := fakeConfig(t, sys, modeLoadable)
	cfg.Store = store
	r := start(t, testkit.Ctx(t), newProvider(t, cfg), request("say hi"))
	wait(t, r)
	if r.SessionID() != r.ID() || r.AgentSessionID() == "" {
		t.Fatalf("session %q, run %q, agent session %q", r.SessionID(), r.ID(), r.AgentSessionID())
	}
	h, recs, err := store.Load(testkit.Ctx(t), r.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	// The descriptor first, the prompt as a user turn in the same append,
	// how the turn stopped last (agentlog.KindStop).
	var stop agentlog.Stop
	var prompt agent.Message
	if h.ParentSessionID != top.SessionID() || h.DelegationDepth != 1 || len(recs) != 3 ||
		recs[1].Kind != persistence.KindMessage || json.Unmarshal(recs[1].Data, &prompt) != nil ||
		prompt.Role != agent.User || subagent.TextOf(prompt.Content) != "say hi" ||
		recs[2].Kind != agentlog.KindStop || json.Unmarshal(recs[2].Data, &stop) != nil || stop.StopReason != subagent.Completed {
		t.Fatalf("header %+v, records %+v", h, recs)
	}
	d, err := descriptor.Fold(recs)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := acpdata.ParseProviderData(d.ProviderData)
	if err != nil {
		t.Fatal(err)
	}
	if d.Provider != acp.DefaultName || pd != (acpdata.ProviderData{Version: 1, SessionID: r.AgentSessionID(), LoadSession: true, Cwd: cfg.Dir}) {
		t.Fatalf("descriptor %+v, provider data %+v", d, pd)
	}
}

// firstTurn runs a turn of script on a loadable fake agent through a
// Service, its provider keeping sessions in store, and disposes it.
func firstTurn(t *testing.T, script string) (svc *registry.Service, store persistence.Store, first subagent.Run, res subagent.Result) {
	t.Helper()
	sys := newSystem(t)
	svc = registry.New(sys)
	t.Cleanup(svc.Close)
	store = persistence.NewMemory()
	cfg := fakeConfig(t, sys, modeLoadable)
	cfg.Store = store
	release, err := svc.RegisterProvider(newProvider(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	first, err = svc.Start(testkit.Ctx(t), acp.DefaultName, request(script))
	if err != nil {
		t.Fatal(err)
	}
	res = wait(t, first)
	must(t, first.Dispose(testkit.Ctx(t)))
	return svc, store, first, res
}

// Contract S6 / P3: an agent that advertises loadSession is resumed
// through session/load with the session id its descriptor keeps, in the
// directory it ran in; the history the agent replays stays out of the
// new output and events, and the new prompt continues the session.
func TestS6_ResumeLoadsTheAgentSessionWithoutItsReplay(t *testing.T) {
	svc, _, first, res := firstTurn(t, "session")
	agentSession := strings.TrimSuffix(strings.TrimPrefix(subagent.TextOf(res.Output), "session:"), " loaded:;")

	events := make(chan subagent.Event, 64)
	sub := svc.ListenParent(top.SessionID(), func(ev subagent.Event) error { events <- ev; return nil })
	t.Cleanup(sub.Release)
	req := request("session", "say continued")
	req.Continuation = &subagent.Continuation{SessionID: first.SessionID()}
	second, err := svc.Resume(testkit.Ctx(t), acp.DefaultName, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Dispose(context.Background()) })
	res = wait(t, second)
	want := "session:" + agentSession + " loaded:" + agentSession + ";continued"
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != want {
		t.Fatalf("resumed: %s %q, want %q", res.StopReason, subagent.TextOf(res.Output), want)
	}
	if second.SessionID() != first.SessionID() {
		t.Fatalf("resumed session %q, want %q", second.SessionID(), first.SessionID())
	}
	must(t, sub.Flush(testkit.Ctx(t)))
	close(events)
	for ev := range events {
		if p, ok := ev.(subagent.RunProgress); ok && strings.Contains(p.Text, "OLD") {
			t.Fatalf("replayed history became progress: %+v", p)
		}
	}
}

// Contract S6 / P3: a child whose agent did not advertise loadSession is
// not resumable: a clear error before any process starts.
func TestS6_ResumeWithoutLoadSessionIsNotResumable(t *testing.T) {
	sys := newSystem(t)
	store := persistence.NewMemory()
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.Store = store
	p := newProvider(t, cfg)
	r := start(t, testkit.Ctx(t), p, request("say hi"))
	wait(t, r)
	before := starts(t, cfg)
	req := request("say again")
	req.Continuation = &subagent.Continuation{SessionID: r.SessionID()}
	_, err := p.Resume(testkit.Ctx(t), subagent.Scope{}, req)
	var nr *acpdata.NotResumableError
	if !errors.As(err, &nr) || !errors.Is(err, subagent.ErrNotResumable) || !strings.Contains(err.Error(), "loadSession") {
		t.Fatalf("err %v", err)
	}
	if starts(t, cfg) != before {
		t.Fatal("an agent was started for a child that cannot be resumed")
	}
}

// Contract D3 / K3: provider data is validated strictly before any
// process starts: another version is not resumable, a malformed one is an
// invalid request, and a descriptor of another provider is refused.
func TestK3_ResumeValidatesProviderData(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeLoadable)
	p := newProvider(t, cfg)
	descriptorOf := func(provider, data string) json.RawMessage {
		rec, err := descriptor.Descriptor{Provider: provider, ProviderData: json.RawMessage(data)}.Record()
		if err != nil {
			t.Fatal(err)
		}
		return rec.Data
	}
	dir := cfg.Dir
	for _, c := range []struct {
		name string
		desc json.RawMessage
		want error
	}{
		{"other version", descriptorOf(acp.DefaultName, `{"version":2,"sessionId":"s","loadSession":true,"cwd":"`+dir+`"}`), subagent.ErrNotResumable},
		{"no provider data", descriptorOf(acp.DefaultName, ``), subagent.ErrNotResumable},
		{"unknown key", descriptorOf(acp.DefaultName, `{"version":1,"sessionId":"s","loadSession":true,"cwd":"`+dir+`","x":1}`), descriptor.ErrMalformed},
		{"key case", descriptorOf(acp.DefaultName, `{"version":1,"SessionId":"s","loadSession":true,"cwd":"`+dir+`"}`), descriptor.ErrMalformed},
		{"null", descriptorOf(acp.DefaultName, `{"version":1,"sessionId":null,"loadSession":true,"cwd":"`+dir+`"}`), descriptor.ErrMalformed},
		{"empty session", descriptorOf(acp.DefaultName, `{"version":1,"sessionId":"","loadSession":true,"cwd":"`+dir+`"}`), subagent.ErrInvalidRequest},
		{"relative cwd", descriptorOf(acp.DefaultName, `{"version":1,"sessionId":"s","loadSession":true,"cwd":"rel"}`), subagent.ErrInvalidRequest},
		{"missing cwd", descriptorOf(acp.DefaultName, `{"version":1,"sessionId":"s","loadSession":true,"cwd":"/nonexistent/acp-dir"}`), acp.ErrDir},
		{"other provider", descriptorOf("spawn", `{"version":1,"sessionId":"s","loadSession":true,"cwd":"`+dir+`"}`), subagent.ErrInvalidRequest},
	} {
		req := request("say x")
		req.Continuation = &subagent.Continuation{SessionID: "child", Descriptor: c.desc}
		if _, err := p.Resume(testkit.Ctx(t), subagent.Scope{}, req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	req := request("say x")
	req.Continuation = &subagent.Continuation{SessionID: "child"}
	if _, err := p.Resume(testkit.Ctx(t), subagent.Scope{}, req); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Errorf("no descriptor and no store: %v", err)
	}
	if n := starts(t, cfg); n != 0 {
		t.Fatalf("%d agents started for refused resumes", n)
	}
}

// Contract S8 (ACP): a resumed activation takes the child's store session
// before its agent starts, so an older activation still running cannot
// record its stop after it: the session ends with the newer one's.
func TestS8_AStaleACPActivationRecordsNothingAfterTheNextTookTheSession(t *testing.T) {
	sys := newSystem(t)
	store := persistence.NewMemory()
	cfg := fakeConfig(t, sys, modeLoadable)
	cfg.Store = store
	p := newProvider(t, cfg)
	first := start(t, testkit.Ctx(t), p, request("session"))
	wait(t, first)
	resume := func(ctx context.Context, scope subagent.Scope, lines ...string) *acp.Run {
		req := request(append([]string{"session"}, lines...)...)
		req.Continuation = &subagent.Continuation{SessionID: first.SessionID()}
		r, err := p.Resume(ctx, scope, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Dispose(context.Background()) })
		return r.(*acp.Run)
	}
	// The stale activation is mid-turn, and stays so until it is
	// cancelled, while the next one takes the session and ends.
	rec := newRecorder()
	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	stale := resume(ctx, scoped(rec), "say stale", "wait")
	rec.waitFor(t, "the stale activation's first chunk", kindIs(subagent.TextDelta))
	next := resume(testkit.Ctx(t), subagent.Scope{}, "say continued")
	wait(t, next)
	cancel()
	if res := wait(t, stale); res.StopReason != subagent.Aborted {
		t.Fatalf("the stale activation ended %+v, want aborted", res)
	}
	_, recs, err := store.Load(testkit.Ctx(t), first.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	msg := persistence.KindMessage // each activation's prompt
	want := []string{descriptor.Kind, msg, agentlog.KindStop, agentlog.KindActivation, msg, agentlog.KindActivation, msg, agentlog.KindStop}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("session records %q, want %q: only the newest activation records its stop", kinds, want)
	}
}

// Contract S9 (ACP): the turn's answer lives in the agent's session, so
// the stop record keeps it, for a parent that died before it stored the
// answer; and a resume with no prompt (a parent recovering a child that
// was running when it died) continues the turn, the agent prompted with
// acp.ContinuePrompt, as an ACP turn needs a prompt.
func TestS9_TheStopKeepsTheAnswerAndAResumeWithoutAPromptContinues(t *testing.T) {
	svc, store, first, _ := firstTurn(t, "say the answer")
	_, recs, err := store.Load(testkit.Ctx(t), first.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	var stop agentlog.Stop
	if last := recs[len(recs)-1]; last.Kind != agentlog.KindStop || json.Unmarshal(last.Data, &stop) != nil || subagent.TextOf(stop.Output) != "the answer" {
		t.Fatalf("the stop record %s %s does not keep the answer", last.Kind, last.Data)
	}

	second, err := svc.Resume(testkit.Ctx(t), acp.DefaultName, subagent.StartRequest{Parent: top, Continuation: &subagent.Continuation{SessionID: first.SessionID()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Dispose(context.Background()) })
	// The fake agent reads a prompt as commands: the first word of this
	// one is none it knows, and it says so.
	word, _, _ := strings.Cut(acp.ContinuePrompt, " ")
	if res := wait(t, second); res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "unknown-command:"+word+";" {
		t.Fatalf("the resumed turn: %s %q %q", res.StopReason, subagent.TextOf(res.Output), res.Detail)
	}
}
