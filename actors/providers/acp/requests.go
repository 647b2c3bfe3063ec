package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/jsonv2"
)

// Bounds of what one agent's requests may hold in the node (K3). The
// agent's requests (session/request_permission, fs/read_text_file,
// fs/write_text_file and any other) are served by a server of ours, not
// by the SDK's connection: that one starts a goroutine per request and
// holds each answer until the agent reads it, so an agent that floods
// requests and stops reading its input grew the node without end.
const (
	// maxRequests is how many requests of one agent may be in flight:
	// received, and their answer not yet written to the agent's input.
	// A request past it is answered at once with an error.
	maxRequests = 32
	// maxHeldBytes bounds the bytes held for one agent's requests in
	// flight: each request as received (twice its line: the line and what
	// is decoded from it), and each answer until the agent has read it (a
	// file read's: twice the file's size, its text and the answer made of
	// it). A request or a file read that would pass it is answered with an
	// error instead.
	maxHeldBytes = 32 << 20
)

// maxAnswer caps one answer's line: an 8 MiB file whose text JSON escapes
// a lot could otherwise pass the 10 MiB line an SDK agent reads.
const maxAnswer = 9 << 20

// errBound is in the error answer of a request refused at a bound; the
// agent may ask again once it has read its earlier answers.
var errBound = errors.New("the node holds too much for this agent's requests in flight; read the answers to earlier requests and retry")

// outbox is the agent's input: our answers and the SDK's messages go
// through it one whole line at a time, so that they never interleave. A
// write waits while the agent does not read: that wait is what holds an
// agent that floods requests back (see server.request). It waits at most
// timeout: then stalled is closed, and that write and every later one
// fail with ErrAgentNotReading.
type outbox struct {
	mu      sync.Mutex
	w       io.Writer
	timeout time.Duration
	stalled chan struct{}
}

// deadliner is a writer whose writes can be given a deadline: the
// agent's input pipe is one (os.File).
type deadliner interface{ SetWriteDeadline(time.Time) error }

func newOutbox(w io.Writer, timeout time.Duration) *outbox {
	return &outbox{w: w, timeout: timeout, stalled: make(chan struct{})}
}

// Write implements io.Writer for the SDK's connection, which writes one
// whole message per call.
func (o *outbox) Write(b []byte) (int, error) { return o.write(b) }

// write writes parts as one message.
func (o *outbox) write(parts ...[]byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.stalled:
		return 0, ErrAgentNotReading
	default:
	}
	if d, ok := o.w.(deadliner); ok {
		_ = d.SetWriteDeadline(time.Now().Add(o.timeout))
	}
	n := 0
	for _, p := range parts {
		m, err := o.w.Write(p)
		n += m
		if errors.Is(err, os.ErrDeadlineExceeded) {
			close(o.stalled)
			err = fmt.Errorf("%w: a write waited %s", ErrAgentNotReading, o.timeout)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// server answers the agent's requests, frames hands them over on its
// reader goroutine, in the order the agent sent them. Each admitted
// request is served on a goroutine of its own (a permission policy may
// wait for a person), within maxRequests and maxHeldBytes; one past a
// bound is answered with an error on the reader goroutine itself, so that
// while the agent does not read its input we do not read its output
// either, and it waits on its pipe.
type server struct {
	c   *client
	out *outbox
	log *slog.Logger

	ctx  context.Context // ends at close: the handlers still waiting give up
	stop context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight map[string]context.CancelFunc // by the request's id, as the agent wrote it
	held     int                           // bytes, see maxHeldBytes
	refused  int                           // requests refused at a bound
	wg       sync.WaitGroup
}

func newServer(c *client, w io.Writer, writeTimeout time.Duration, log *slog.Logger) *server {
	s := &server{c: c, out: newOutbox(w, writeTimeout), log: log, inflight: map[string]context.CancelFunc{}}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// update implements inbound.
func (s *server) update(n sdk.SessionNotification) { s.c.update(n) }

// request implements inbound: it admits the request, line bytes long, or
// refuses it.
func (s *server) request(id json.RawMessage, method string, params json.RawMessage, line int) {
	key, cost := string(id), 2*line
	s.mu.Lock()
	var refusal string
	switch _, dup := s.inflight[key]; {
	case s.closed:
		refusal = "the run is ending"
	case dup:
		refusal = "a request with this id is in flight already"
	case len(s.inflight) >= maxRequests:
		refusal = fmt.Sprintf("%d requests of the agent were in flight already (the limit)", maxRequests)
	case s.held+cost > maxHeldBytes:
		refusal = fmt.Sprintf("the requests in flight held %d bytes already (the limit is %d)", s.held, maxHeldBytes)
	}
	if refusal == "" {
		ctx, cancel := context.WithCancel(s.ctx)
		s.inflight[key] = cancel
		s.held += cost
		s.wg.Add(1)
		go s.serve(ctx, key, id, method, params, cost)
	} else {
		s.refused++
	}
	s.mu.Unlock()
	if refusal != "" {
		s.c.limit(fmt.Sprintf("refused the agent's %s: %s", truncate(method, 64), refusal))
		body, isErr := marshalAnswer(nil, boundError(refusal))
		s.write(id, body, isErr)
	}
}

// cancelRequest implements inbound: $/cancel_request ends the handler of
// the request it names, whose answer then says so.
func (s *server) cancelRequest(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.mu.Lock()
	cancel := s.inflight[string(p.RequestID)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// serve answers one admitted request and lets go of what it held once the
// answer is written.
func (s *server) serve(ctx context.Context, key string, id json.RawMessage, method string, params json.RawMessage, cost int) {
	defer s.wg.Done()
	held := cost
	reserve := func(n int) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held+n > maxHeldBytes {
			s.refused++
			return fmt.Errorf("%w (%d bytes more would pass the limit of %d)", errBound, n, maxHeldBytes)
		}
		s.held += n
		held += n
		return nil
	}
	body, isErr := marshalAnswer(s.dispatch(ctx, method, params, reserve))
	// The answer is held until written: what the handler reserved beyond
	// the request's line (a file read's text and answer) covers it, but
	// for a text JSON escapes a lot.
	switch extra := len(body) - (held - cost); {
	case len(body) > maxAnswer:
		body, isErr = marshalAnswer(nil, sdk.NewInternalError(map[string]any{"error": fmt.Sprintf("the answer would be %d bytes, longer than an agent reads in one line", len(body))}))
	case !isErr && extra > 0:
		if err := reserve(extra); err != nil {
			s.c.limit(fmt.Sprintf("refused the agent's %s: %v", truncate(method, 64), err))
			body, isErr = marshalAnswer(nil, boundError(err.Error()))
		}
	}
	s.write(id, body, isErr)
	s.mu.Lock()
	s.held -= held
	delete(s.inflight, key)
	s.mu.Unlock()
}

// dispatch decodes a request's params as the SDK would and calls its
// handler; reserve claims bytes of maxHeldBytes for a file's text. The
// answer comes as JSON, or as an error.
func (s *server) dispatch(ctx context.Context, method string, params json.RawMessage, reserve func(int) error) (any, *sdk.RequestError) {
	switch method {
	case sdk.ClientMethodSessionRequestPermission:
		var p sdk.RequestPermissionRequest
		if rerr := decode(params, &p, p.Validate); rerr != nil {
			return nil, rerr
		}
		return answerOf(s.c.permission(ctx, p))
	case sdk.ClientMethodFsReadTextFile:
		var p sdk.ReadTextFileRequest
		if rerr := decode(params, &p, p.Validate); rerr != nil {
			return nil, rerr
		}
		text, err := s.c.readFile(ctx, p, reserve)
		if err != nil {
			if errors.Is(err, errBound) {
				s.c.limit(fmt.Sprintf("refused a file read of the agent: %v", err))
			}
			return answerOf(text, err)
		}
		// ReadTextFileResponse's JSON, written straight from the text
		// rather than through a copy of it in the struct.
		body := append(make([]byte, 0, len(text)+16), `{"content":`...)
		body = jsonv2.AppendString(body, text)
		return json.RawMessage(append(body, '}')), nil
	case sdk.ClientMethodFsWriteTextFile:
		var p sdk.WriteTextFileRequest
		if rerr := decode(params, &p, p.Validate); rerr != nil {
			return nil, rerr
		}
		return answerOf(s.c.writeFile(ctx, p))
	}
	// Terminals, elicitation, MCP and extension methods: agents own their
	// tools.
	return nil, sdk.NewMethodNotFound(method)
}

// decode unmarshals params into v and validates it, as the SDK does.
func decode(params json.RawMessage, v any, validate func() error) *sdk.RequestError {
	err := json.Unmarshal(params, v)
	if err == nil {
		err = validate()
	}
	if err != nil {
		return sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	return nil
}

// answerOf is a handler's answer as a result or a JSON-RPC error.
func answerOf[T any](resp T, err error) (any, *sdk.RequestError) {
	if err == nil {
		return resp, nil
	}
	var re *sdk.RequestError
	if errors.As(err, &re) {
		return nil, re
	}
	if errors.Is(err, errBound) {
		return nil, boundError(err.Error())
	}
	return nil, sdk.NewInternalError(map[string]any{"error": err.Error()})
}

// boundError is the answer to a request refused at a bound.
func boundError(reason string) *sdk.RequestError {
	return sdk.NewInternalError(map[string]any{"error": reason, "retry": errBound.Error()})
}

// marshalAnswer is the JSON of a result, or of its error.
func marshalAnswer(result any, rerr *sdk.RequestError) (body []byte, isErr bool) {
	if raw, ok := result.(json.RawMessage); ok && rerr == nil {
		return raw, false // written by us, valid
	}
	if rerr == nil {
		body, err := json.Marshal(result)
		if err == nil {
			return body, false
		}
		rerr = sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	body, _ = json.Marshal(rerr) // strings and maps of strings always marshal
	return body, true
}

// write writes an answer to request id, one line. A write that fails (the
// agent's input closed) has nobody to tell: the turn notices the
// connection's end.
func (s *server) write(id json.RawMessage, body []byte, isErr bool) {
	key := `,"result":`
	if isErr {
		key = `,"error":`
	}
	_, _ = s.out.write([]byte(`{"jsonrpc":"2.0","id":`), id, []byte(key), body, []byte("}\n"))
}

// close waits for the handlers once nothing more can arrive (the
// connection's reader has returned) and the agent's input is closed, so
// that no write waits any more.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	refused := s.refused
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	if refused > 0 {
		s.log.Warn("acp: refused requests of the agent at a bound", "count", refused, "maxRequests", maxRequests, "maxHeldBytes", maxHeldBytes)
	}
}

// unserved is the sdk.Client the SDK's connection is given: frames hands
// it responses only (the agent's requests and updates go to server), so
// it is never called. Should it be, it refuses.
type unserved struct{}

var _ sdk.Client = unserved{}

func (unserved) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

func (unserved) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

func (unserved) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodSessionRequestPermission)
}

func (unserved) SessionUpdate(context.Context, sdk.SessionNotification) error { return nil }

func (unserved) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

func (unserved) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

func (unserved) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

func (unserved) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

func (unserved) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}
