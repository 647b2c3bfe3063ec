package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"
)

// Server is a running scripted server. It is safe for concurrent use.
type Server struct {
	// URL is the base URL clients use, ending in /v1 (what
	// OPENAI_BASE_URL holds).
	URL string

	http   *httptest.Server
	models []string
	t      testing.TB // nil outside tests
	record io.Writer  // nil: no JSON-lines record

	closing     chan struct{} // closed by Close: ends stalls and holds
	release     chan struct{} // closed by Release
	releaseOnce sync.Once
	closeOnce   sync.Once

	// respond, when set, computes each chat request's step in place of
	// the script (NewResponder).
	respond func(Request) Step

	mu       sync.Mutex
	steps    []Step
	next     int
	reqs     []*Request
	finished int
	stalled  int
	inFlight int
	peak     int
	changed  chan struct{} // closed and replaced on every change
}

// NewServer starts a server on a loopback port that answers chat requests
// with steps in order; it is closed when the test ends. A request beyond
// the script fails the test and gets a 500.
func NewServer(t testing.TB, steps ...Step) *Server {
	t.Helper()
	if err := validateSteps(steps); err != nil {
		t.Fatalf("openaitest: %v", err)
	}
	return newServer(Script{Steps: steps}).startTest(t)
}

// NewResponder starts a server like NewServer's that answers each chat
// request with the step respond computes from it, so that the answers can
// follow the conversation (a client resumed from any point, requests in any
// order). respond is called concurrently, once per request; a step it
// returns that is not valid fails the test and gets a 500.
func NewResponder(t testing.TB, respond func(Request) Step) *Server {
	s := newServer(Script{})
	s.respond = respond
	return s.startTest(t)
}

// Listen starts a server on addr ("127.0.0.1:0" picks a free port) that
// follows sc. When record is not nil, every finished request is written to
// it as one JSON line.
func Listen(addr string, sc Script, record io.Writer) (*Server, error) {
	if err := validateSteps(sc.Steps); err != nil {
		return nil, fmt.Errorf("openaitest: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("openaitest: %w", err)
	}
	s := newServer(sc)
	s.record = record
	return s.start(l), nil
}

func newServer(sc Script) *Server {
	models := sc.Models
	if len(models) == 0 {
		models = []string{DefaultModel}
	}
	return &Server{
		models:  models,
		steps:   sc.Steps,
		closing: make(chan struct{}),
		release: make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// start serves s on l, or on a loopback port of its own when l is nil.
func (s *Server) start(l net.Listener) *Server {
	s.http = httptest.NewUnstartedServer(s)
	if l != nil {
		s.http.Listener.Close() // replaced by l
		s.http.Listener = l
	}
	s.http.Start()
	s.URL = s.http.URL + "/v1"
	return s
}

// startTest starts s for t, which it closes when the test ends.
func (s *Server) startTest(t testing.TB) *Server {
	s.t = t
	s.start(nil)
	t.Cleanup(s.Close)
	return s
}

// Client is an HTTP client for the server whose idle connections Close
// closes, so that no connection goroutine outlives a test.
func (s *Server) Client() *http.Client { return s.http.Client() }

// Close ends stalls and holds, then shuts the server down and waits for its
// handlers. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.http.Close()
	})
}

// Release lets every held request (Step.Hold) go on, and later ones pass.
func (s *Server) Release() { s.releaseOnce.Do(func() { close(s.release) }) }

// Requests returns a copy of the chat requests received so far, in arrival
// order. A request still being answered may not yet show Cancelled.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// Peak is the largest number of chat requests that were in flight at once.
func (s *Server) Peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Remaining is the number of script steps not yet taken (none for a
// responder).
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(len(s.steps)-s.next, 0)
}

// WaitFinished waits until n chat requests have been answered (or
// abandoned) and returns them all; it fails t by name at the await
// deadline.
func (s *Server) WaitFinished(t testing.TB, n int) []Request {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d finished chat requests", n), func() bool { return s.finished >= n })
	return s.Requests()
}

// WaitStalled waits until n requests have sent their chunks before a
// stall (Step.Stall) and are waiting for their clients to cancel.
func (s *Server) WaitStalled(t testing.TB, n int) {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d stalled chat requests", n), func() bool { return s.stalled >= n })
}

// WaitInFlight waits until n chat requests are in flight at once.
func (s *Server) WaitInFlight(t testing.TB, n int) {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d chat requests in flight", n), func() bool { return s.inFlight >= n })
}

func (s *Server) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testkit.Deadline)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("openaitest: waited %s for %s", testkit.Deadline, what)
		}
	}
}

// notify wakes the waiters; s.mu is held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ServeHTTP answers the OpenAI routes the server knows.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.listModels(w)
	default:
		writeError(w, http.StatusNotFound, errorBody("openaitest: no route "+r.Method+" "+r.URL.Path, "invalid_request_error"), "")
	}
}

func (s *Server) listModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, m := range s.models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "openaitest"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list) // a write error means the client left
}

// begin records a request and, if take, takes its step: the script's
// next, or for a responder only the answer's number (the caller asks the
// responder, outside s.mu).
func (s *Server) begin(rec *Request, take bool) (Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, rec)
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	s.notify()
	rec.Step = -1
	if !take || (s.respond == nil && s.next >= len(s.steps)) {
		return Step{}, false
	}
	rec.Step = s.next
	s.next++
	if s.respond != nil {
		return Step{}, true
	}
	return s.steps[rec.Step], true
}

func (s *Server) end(rec *Request) {
	s.mu.Lock()
	s.inFlight--
	s.finished++
	line, _ := json.Marshal(rec) // a Request always marshals
	if s.record != nil {
		// Under s.mu so that lines never interleave.
		_, _ = s.record.Write(append(line, '\n'))
	}
	s.notify()
	s.mu.Unlock()
}

// setCancelled marks rec as cancelled by its client.
func (s *Server) setCancelled(rec *Request) {
	s.mu.Lock()
	rec.Cancelled = true
	s.mu.Unlock()
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(r.Body)
	rec, decodeErr := decodeRequest(body)
	rec.Authorization = r.Header.Get("Authorization")
	// A request the server cannot read takes no step.
	step, ok := s.begin(&rec, readErr == nil && decodeErr == nil)
	defer s.end(&rec)
	if ok && s.respond != nil {
		// Only this goroutine writes rec: reading it needs no lock.
		step = s.respond(rec)
		if err := step.validate(); err != nil {
			s.t.Errorf("openaitest: the responder's step for request %d: %v", rec.Step, err)
			ok = false
		}
	}
	switch {
	case readErr != nil:
		s.setCancelled(&rec) // the client went away while sending
		return
	case decodeErr != nil:
		writeError(w, http.StatusBadRequest, errorBody("openaitest: request body: "+decodeErr.Error(), "invalid_request_error"), "")
		return
	case !ok && s.respond != nil:
		writeError(w, http.StatusInternalServerError, errorBody("openaitest: the responder's step is not valid", "server_error"), "")
		return
	case !ok:
		if s.t != nil {
			s.t.Errorf("openaitest: request %d is beyond the script", len(s.Requests()))
		}
		writeError(w, http.StatusInternalServerError, errorBody("openaitest: script exhausted", "server_error"), "")
		return
	}
	if step.Hold {
		select {
		case <-s.release:
		case <-r.Context().Done():
			s.setCancelled(&rec)
			return
		case <-s.closing:
			return
		}
	}
	a := answer{s: s, w: w, r: r, rec: &rec, step: step, id: fmt.Sprintf("chatcmpl-openaitest-%d", rec.Step)}
	switch {
	case step.Status != 0:
		b := step.Body
		if b == "" {
			b = errorBody(fmt.Sprintf("openaitest: status %d", step.Status), "server_error")
		}
		writeError(w, step.Status, b, step.RetryAfter)
	case step.Malformed:
		a.malformed()
	case rec.Stream:
		a.stream()
	default:
		a.whole()
	}
}

// answer writes one reply.
type answer struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	rec  *Request
	step Step
	id   string
}

func (a *answer) model() string {
	if a.rec.Model != "" {
		return a.rec.Model
	}
	return a.s.models[0]
}

func (a *answer) malformed() {
	body, ctype := `{"id": "`+a.id+`", "object": "chat.completion", "choices": [{`, "application/json"
	if a.rec.Stream {
		body, ctype = `data: {"id": "`+a.id+`", "choices": [{"delta": {"content": "cut`+"\n\n", "text/event-stream"
	}
	if a.step.Body != "" {
		body = a.step.Body
	}
	a.w.Header().Set("Content-Type", ctype)
	_, _ = io.WriteString(a.w, body) // a write error means the client left
}

func (a *answer) stream() {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	include := a.rec.StreamOptions != nil && a.rec.StreamOptions.IncludeUsage
	chunks := a.step.chunks(a.id, a.model(), include)
	rc := http.NewResponseController(a.w)
	for i, c := range chunks {
		if a.interrupt(i) {
			return
		}
		data, _ := json.Marshal(c) // chunks always marshal
		if !a.write("data: " + string(data) + "\n\n") {
			return
		}
		_ = rc.Flush() // so that the client sees each chunk on its own
	}
	if !a.interrupt(len(chunks)) {
		a.write("data: [DONE]\n\n")
	}
}

func (a *answer) whole() {
	data, _ := json.Marshal(a.step.completion(a.id, a.model())) // always marshals
	a.w.Header().Set("Content-Type", "application/json")
	if a.step.Drop || a.step.Stall {
		// Promise the whole body, send half: the client reads a short body.
		a.w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		a.w.WriteHeader(http.StatusOK)
		a.write(string(data[:len(data)/2]))
		a.interrupt(a.step.After)
		return
	}
	a.write(string(data))
}

// write writes s; false means the client went away.
func (a *answer) write(s string) bool {
	if _, err := io.WriteString(a.w, s); err != nil {
		a.s.setCancelled(a.rec)
		return false
	}
	return true
}

// interrupt carries out a drop or stall fault when sent chunks have gone
// out; true means the answer must stop here.
func (a *answer) interrupt(sent int) bool {
	switch {
	case a.step.Drop && sent >= a.step.After:
		a.drop()
		return true
	case a.step.Stall && sent >= a.step.After:
		_ = http.NewResponseController(a.w).Flush()
		a.s.mu.Lock()
		a.s.stalled++
		a.s.notify()
		a.s.mu.Unlock()
		select {
		case <-a.r.Context().Done():
			a.s.setCancelled(a.rec)
		case <-a.s.closing:
		}
		return true
	}
	return false
}

// drop closes the connection without finishing the response, so that the
// client's read of the body fails with an unexpected EOF.
func (a *answer) drop() {
	conn, buf, err := http.NewResponseController(a.w).Hijack()
	if err != nil {
		return // not HTTP/1: the handler returning is the best we can do
	}
	// What the server buffered goes out; the chunked body's end never does.
	_ = buf.Flush()
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, status int, body, retryAfter string) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // a write error means the client left
}
