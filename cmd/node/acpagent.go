package main

// node acp: the node as an ACP v1 agent on stdin and stdout (X1). An
// editor's session is a top-level session in the data directory; its
// prompts run a top agent on the node's model with the file tools
// confined to the session's cwd, the subagent tool (children on the
// node's model) and a delegate tool per -config agent server. Each child
// is shown as a tool call whose updates carry its progress and result;
// session/cancel cancels the turn and every child; session/load replays a
// session's history and continues it. The ACP children's permission and
// file requests go to the editor (acprelay.go); what the client sends
// passes a gate first (acpgate.go). Nothing but ACP frames goes to
// stdout: logs go to stderr.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/ids"
	"github.com/subactor/subactor/internal/otelx"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// kindACP marks the log-only record a node acp session starts with: the
// directory it works in, so that session/load continues it there. Log-only,
// it survives compaction (D4).
const kindACP = "node/acp"

// acpSessionRecord is the data of a kindACP record.
type acpSessionRecord struct {
	Cwd string `json:"cwd"`
}

// acpSystemPrompt is the top agent's system prompt on a real model (the
// scripted model follows the task text alone).
const acpSystemPrompt = `You are a coding agent's coordinator. You work in the user's project with read-only file tools. ` +
	`Delegate self-contained pieces of work to child agents with the subagent tool and the other delegate tools ` +
	`(a short description, and a prompt saying everything the child needs), then answer the user.`

// acpCommand runs node acp until the client disconnects (stdin ends) or
// a stop signal: ACP frames on stdout, logs on stderr.
func acpCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseFace("acp", args, stdout, stderr, nil)
	if !ok {
		return code
	}
	return serveACP(ctx, o, os.Stdin, stdout, stderr)
}

// serveACP serves one ACP client reading in and writing out until in
// ends or ctx does; everything it started has ended when it returns.
func serveACP(ctx context.Context, o options, in io.Reader, out, stderr io.Writer) int {
	f, err := openFace(ctx, o, stderr)
	if err != nil {
		return faceFailed(stderr, "acp", err)
	}
	defer f.close()
	base, stop := context.WithCancel(ctx)
	defer stop()
	log := logger(stderr)
	a := &acpAgent{f: f, base: base, sessions: map[string]*acpSession{}, gate: newACPGate(out, log)}
	a.conn = acp.NewAgentSideConnection(a, a.gate.out, a.gate.reader(base, in))
	a.conn.SetLogger(log)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	// A client gone mid-turn leaves nothing running: every turn is
	// cancelled and awaited, then every session's tree is closed.
	stop()
	a.shutdown()
	return exitOK
}

// acpAgent is the ACP agent of one connection.
type acpAgent struct {
	f    *face
	conn *acp.AgentSideConnection
	// base ends when the connection does: every turn's context ends with it.
	base context.Context
	// gate bounds what the client sends (acpgate.go).
	gate *acpGate

	mu       sync.Mutex
	sessions map[string]*acpSession
	closed   bool
	turns    sync.WaitGroup
	// fs is what the client said it serves at initialize.
	fs acp.FileSystemCapabilities
}

// acpSession is one open session: its tree and top agent.
type acpSession struct {
	a    *acpAgent
	id   string
	tree *delegationTree
	top  *agent.Agent
	// events are the children's run events, shown as tool calls.
	events subagent.Subscription
	// turn holds one prompt at a time; the gate refuses a second prompt
	// while one runs, so it is only ever waited for by a prompt admitted
	// as the previous one answered.
	turn chan struct{}

	mu       sync.Mutex
	streamed map[int]bool // the top agent's steps whose text streamed
}

var _ acp.AgentLoader = (*acpAgent)(nil)

// Initialize implements acp.Agent.
func (a *acpAgent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.fs = p.ClientCapabilities.Fs
	a.mu.Unlock()
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: true,
			// Text and resource links; embedded text resources are read
			// as text too.
			PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true},
		},
		AgentInfo: &acp.Implementation{Name: "subactor", Version: moduleVersion()},
	}, nil
}

// moduleVersion is the node's module version, "(devel)" in a build from
// a working tree.
func moduleVersion() string {
	v, _, _ := strings.Cut(versionText(), "\n")
	_, v, _ = strings.Cut(v, " ")
	return v
}

// Authenticate implements acp.Agent: there is nothing to authenticate.
func (a *acpAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession implements acp.Agent: a top-level session in the data
// directory, working in the client's cwd.
func (a *acpAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	cwd, err := readableDir(p.Cwd)
	if err != nil || p.Cwd != cwd {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("cwd %q must be an absolute path of a readable directory", p.Cwd)})
	}
	s, err := a.open(ctx, ids.New(), cwd, false)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.id)}, nil
}

// LoadSession implements acp.AgentLoader: the session's history is
// replayed as session updates, then it takes prompts again, in the
// directory it was created in.
func (a *acpAgent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	id := string(p.SessionId)
	if !ids.Valid(id) {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("%q is not a session id", id)})
	}
	h, recs, err := a.f.store.Load(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("no session %s", id)})
	}
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	var rec acpSessionRecord
	for _, r := range recs {
		if r.Kind == kindACP {
			if err := json.Unmarshal(r.Data, &rec); err != nil {
				return acp.LoadSessionResponse{}, &persistence.CorruptError{SessionID: id, Part: "record", Err: err}
			}
			break // the first one is authoritative
		}
	}
	if rec.Cwd == "" || h.ParentSessionID != "" {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("session %s is not a session of %s acp", id, prog)})
	}
	if _, err := readableDir(rec.Cwd); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s, err := a.open(ctx, id, rec.Cwd, true)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	for _, u := range replay(recs) {
		if err := s.update(u); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	return acp.LoadSessionResponse{}, nil
}

// replay is the session updates that show a log's model-visible turns:
// the user's prompts, the top agent's text, and its tool calls with
// their results.
func replay(recs []persistence.Record) []acp.SessionUpdate {
	var out []acp.SessionUpdate
	for _, r := range recs {
		if r.Kind != persistence.KindMessage {
			continue
		}
		var m agent.Message
		if json.Unmarshal(r.Data, &m) != nil {
			continue
		}
		text := subagent.TextOf(m.Content)
		switch m.Role {
		case agent.User:
			out = append(out, acp.UpdateUserMessageText(text))
		case agent.Assistant:
			if text != "" {
				out = append(out, acp.UpdateAgentMessageText(text))
			}
			for _, c := range m.ToolCalls {
				out = append(out, acp.StartToolCall(acp.ToolCallId(c.ID), c.Name, acp.WithStartKind(acp.ToolKindOther), acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(c.Args)))
			}
		case agent.ToolRole:
			status := acp.ToolCallStatusCompleted
			if m.IsError {
				status = acp.ToolCallStatusFailed
			}
			out = append(out, acp.UpdateToolCall(acp.ToolCallId(m.ToolCallID), acp.WithUpdateStatus(status), acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(clip(text, 4096)))})))
		}
	}
	return out
}

// open opens session id working in cwd: a new one, or with resume the
// stored one.
func (a *acpAgent) open(ctx context.Context, id, cwd string, resume bool) (*acpSession, error) {
	a.mu.Lock()
	_, open := a.sessions[id]
	n, closed := len(a.sessions), a.closed
	a.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("the connection is closing")
	case open:
		return nil, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("session %s is already open", id)})
	case n >= maxSessions:
		return nil, acp.NewInvalidRequest(map[string]any{"error": fmt.Sprintf("at most %d sessions may be open on one connection", maxSessions)})
	}
	s := &acpSession{a: a, id: id, turn: make(chan struct{}, 1), streamed: map[int]bool{}}
	a.mu.Lock()
	relay := &editorRelay{s: s, cwd: cwd, read: a.fs.ReadTextFile, write: a.fs.WriteTextFile}
	a.mu.Unlock()
	t, err := a.f.tree(cwd, newProgress(io.Discard), relay)
	if err != nil {
		return nil, err
	}
	maxDepth := a.f.o.maxDepth
	cfg := agent.Config{
		Store:   a.f.store,
		Header:  subagent.SessionHeader{SessionID: id},
		Resume:  resume,
		Model:   a.f.m.top,
		Tools:   t.tools,
		Options: subagent.AgentOptions{MaxDepth: &maxDepth, ModelProvider: a.f.m.endpoint, Model: a.f.m.name},
		OnStep:  s.step,
	}
	if a.f.m.real {
		cfg.System = acpSystemPrompt
	}
	if !resume {
		rec, err := json.Marshal(acpSessionRecord{Cwd: cwd})
		if err != nil {
			t.close()
			return nil, err
		}
		cfg.LogOnly = []persistence.Record{{Kind: kindACP, Data: rec}}
	}
	top, err := agent.New(ctx, cfg)
	if err != nil {
		t.close()
		return nil, err
	}
	s.tree, s.top = t, top
	s.events = t.svc.ListenParent(id, s.event)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, open := a.sessions[id]; open || a.closed {
		s.close()
		return nil, errors.New("the session was opened twice at once, or the connection is closing")
	}
	a.sessions[id] = s
	return s, nil
}

// close ends the session's listener, its top agent and its tree (every
// child it still has).
func (s *acpSession) close() {
	s.events.Release()
	s.top.Close()
	s.tree.close()
}

// session is the open session id, or an error for the client.
func (a *acpAgent) session(id acp.SessionId) (*acpSession, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[string(id)]
	if !ok {
		return nil, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("no open session %s (session/new or session/load first)", id)})
	}
	if a.closed {
		return nil, errors.New("the connection is closing")
	}
	a.turns.Add(1)
	return s, nil
}

// Prompt implements acp.Agent: one turn of the session's top agent. Its
// text streams as agent message chunks and its children as tool calls;
// ctx ends with session/cancel, a newer prompt or the connection.
func (a *acpAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	// Runs before the answer is written: a client that sends its next
	// prompt once it has the answer finds the session free.
	defer a.gate.promptEnded(p.SessionId)
	s, err := a.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	defer a.turns.Done()
	blocks, err := promptBlocks(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	// An editor that traces hands its span in _meta (O3): the turn's
	// tree joins its trace.
	ctx = otelx.FromMeta(ctx, p.Meta)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.base, cancel)
	defer stop()
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	defer func() { <-s.turn }()
	res := s.top.Run(ctx, blocks, nil)
	// Every child has settled: their last updates go before the answer.
	if err := s.events.Flush(context.WithoutCancel(ctx)); err != nil {
		return acp.PromptResponse{}, err
	}
	switch {
	case ctx.Err() != nil || res.StopReason == subagent.Aborted:
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case res.StopReason == subagent.Completed:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case res.StopReason == subagent.MaxTokens:
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case res.StopReason == subagent.Refusal:
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"stopReason": string(res.StopReason), "error": res.Detail})
}

// promptBlocks are a prompt's content as the top agent takes it: text,
// resource links as their URI and embedded text resources as their text;
// other content (images, audio) is refused, as Initialize said, and so is
// a prompt over maxPromptBytes (K3).
func promptBlocks(prompt []acp.ContentBlock) ([]subagent.ContentBlock, error) {
	var out []subagent.ContentBlock
	size := 0
	for i, b := range prompt {
		var text string
		switch {
		case b.Text != nil:
			text = b.Text.Text
		case b.ResourceLink != nil:
			text = b.ResourceLink.Uri
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			text = fmt.Sprintf("%s:\n%s", r.Uri, r.Text)
		default:
			return nil, fmt.Errorf("prompt block %d: only text and resources are supported", i)
		}
		if size += len(text); size > maxPromptBytes {
			return nil, errPromptTooLarge
		}
		out = append(out, subagent.Text(text))
	}
	if len(out) == 0 {
		return nil, errors.New("the prompt is empty")
	}
	return out, nil
}

// Cancel implements acp.Agent: the SDK has already cancelled the
// session's prompt, whose turn cancels every child.
func (a *acpAgent) Cancel(context.Context, acp.CancelNotification) error { return nil }

// update sends one session update to the client. The connection's own
// context is used: a cancelled turn's last updates still go out.
func (s *acpSession) update(u acp.SessionUpdate) error {
	return s.a.conn.SessionUpdate(context.WithoutCancel(s.a.base), acp.SessionNotification{SessionId: acp.SessionId(s.id), Update: u})
}

// step shows the top agent's text: streamed pieces as they come, or the
// final text of a step that streamed none.
func (s *acpSession) step(st agent.Step) {
	var text string
	switch st.Kind {
	case subagent.TextDelta:
		s.mu.Lock()
		s.streamed[st.N] = true
		s.mu.Unlock()
		text = st.Text
	case subagent.MessageText:
		s.mu.Lock()
		streamed := s.streamed[st.N]
		delete(s.streamed, st.N)
		s.mu.Unlock()
		if !streamed {
			text = st.Text
		}
	}
	if text != "" {
		_ = s.update(acp.UpdateAgentMessageText(text))
	}
}

// event shows a child: a tool call from its start, updated with its
// progress, completed or failed with its result.
func (s *acpSession) event(ev subagent.Event) error {
	switch ev := ev.(type) {
	case subagent.RunStarted:
		title := ev.Provider
		if ev.Task != "" {
			title += ": " + ev.Task
		}
		return s.update(acp.StartToolCall(acp.ToolCallId(ev.RunID), title,
			acp.WithStartKind(acp.ToolKindOther), acp.WithStartStatus(acp.ToolCallStatusInProgress),
			acp.WithStartRawInput(map[string]any{"provider": ev.Provider, "task": ev.Task, "sessionId": ev.SessionID})))
	case subagent.RunProgress:
		line := stepText(ev)
		if line == "" {
			return nil
		}
		return s.update(acp.UpdateToolCall(acp.ToolCallId(ev.RunID), acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(line))})))
	case subagent.RunEnded:
		status, text := acp.ToolCallStatusCompleted, subagent.TextOf(ev.Result.Output)
		if ev.StopReason != subagent.Completed {
			status = acp.ToolCallStatusFailed
			text = strings.TrimSpace(fmt.Sprintf("%s: %s\n%s", ev.StopReason, ev.Result.Detail, text))
		}
		return s.update(acp.UpdateToolCall(acp.ToolCallId(ev.RunID), acp.WithUpdateStatus(status),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}),
			acp.WithUpdateRawOutput(map[string]any{"stopReason": string(ev.StopReason), "usage": ev.Usage})))
	}
	return nil
}

// shutdown waits for every turn (their contexts have ended) and closes
// every session.
func (a *acpAgent) shutdown() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.turns.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, s := range a.sessions {
		s.close()
		delete(a.sessions, id)
	}
}

// The methods the node does not offer.

// CloseSession implements acp.Agent.
func (a *acpAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

// ListSessions implements acp.Agent.
func (a *acpAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

// ResumeSession implements acp.Agent.
func (a *acpAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

// SetSessionConfigOption implements acp.Agent.
func (a *acpAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

// SetSessionMode implements acp.Agent.
func (a *acpAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}
