package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	sdk "github.com/coder/acp-go-sdk"
)

// maxLine is the longest line (one JSON-RPC message) we accept from an
// agent. It is below the SDK's own 10 MiB cap so that an over-long line
// fails here, with an error that says so, rather than as an anonymous
// disconnect; it also bounds what one message can make us hold.
const maxLine = 8 << 20

// ErrLineTooLong is in the result of a turn whose agent wrote a line
// longer than 8 MiB: the connection was closed at that point.
var ErrLineTooLong = errors.New("acp: agent wrote a line longer than the limit")

// loggedDrops is how many dropped lines a run logs one by one; the rest
// are only counted.
const loggedDrops = 3

// inbound is what frames hands the agent's messages to, all but the
// responses the SDK's connection awaits, on the reader goroutine in the
// order the agent sent them.
type inbound interface {
	// update is a session/update notification.
	update(sdk.SessionNotification)
	// request is a request of the agent's, line bytes long.
	request(id json.RawMessage, method string, params json.RawMessage, line int)
	// cancelRequest is $/cancel_request.
	cancelRequest(params json.RawMessage)
}

// frames is the agent's output on its way to the SDK's connection: the
// boundary where it is checked (K3). It reads it line by line (one
// JSON-RPC message a line) on the connection's reader goroutine and
//
//   - fails the stream at a line longer than maxLine;
//   - drops what is not a JSON-RPC object, and notifications we do not
//     handle, which the SDK would only log;
//   - hands session/update notifications, requests and $/cancel_request
//     to in, in order, before reading on;
//   - passes responses to the SDK.
//
// Handling updates here rather than in the SDK's notification queue is
// what bounds memory against a flooding agent: the SDK queues up to 1024
// notifications and closes the connection when an agent outruns it (a
// long history replayed by session/load can), while here the agent simply
// waits on its pipe until we have read on. A response still follows every
// update the agent sent before it, which is the order the SDK promises.
// Requests go to our server rather than the SDK's for the same reason
// (see maxRequests).
type frames struct {
	gate    chan struct{} // closed by open
	opened  sync.Once
	src     *bufio.Reader
	in      inbound
	log     *slog.Logger
	pending []byte // a line passed on, not yet read by the SDK
	err     error  // sticky, once the stream has failed or ended
	failed  atomic.Pointer[error]
	dropped atomic.Int64
}

func newFrames(r io.Reader, in inbound, log *slog.Logger) *frames {
	return &frames{gate: make(chan struct{}), src: bufio.NewReaderSize(r, 64<<10), in: in, log: log}
}

// open lets the SDK's reader start. The SDK's connection starts its
// goroutines at once, and its SetLogger writes a field they read without
// a lock; holding back the first Read until SetLogger has returned keeps
// them from logging (or doing anything) before. Idempotent.
func (f *frames) open() { f.opened.Do(func() { close(f.gate) }) }

// Read implements io.Reader for the SDK's connection.
func (f *frames) Read(p []byte) (int, error) {
	<-f.gate
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.line()
		if len(line) > 0 {
			f.route(line)
		}
		if err != nil {
			f.err = err
			if errors.Is(err, ErrLineTooLong) {
				f.failed.Store(&err)
			}
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// line reads one line, newline included (the last one of the stream may
// lack it), refusing to hold more than maxLine bytes of it.
func (f *frames) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.src.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine+1 { // +1: the newline
			return nil, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, maxLine)
		}
		// A copy: ReadSlice's bytes are only good until the next read.
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// envelope is what routing needs of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// route decides what becomes of one line.
func (f *frames) route(line []byte) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	var env envelope
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &env) != nil {
		f.drop("not a JSON-RPC object", trimmed)
		return
	}
	isNotification := len(env.ID) == 0
	switch {
	case isNotification && env.Method == sdk.ClientMethodSessionUpdate:
		var n sdk.SessionNotification
		if err := json.Unmarshal(env.Params, &n); err != nil {
			f.drop("session/update with invalid params", trimmed)
			return
		}
		f.in.update(n)
	case isNotification && env.Method == "$/cancel_request":
		f.in.cancelRequest(env.Params)
	case isNotification:
		f.drop("a notification we do not handle", trimmed)
	case env.Method != "":
		f.in.request(env.ID, env.Method, env.Params, len(line))
	default: // a response
		f.pass(line)
	}
}

func (f *frames) pass(line []byte) {
	if line[len(line)-1] != '\n' {
		line = append(line, '\n')
	}
	f.pending = line
}

func (f *frames) drop(why string, line []byte) {
	if f.dropped.Add(1) <= loggedDrops {
		f.log.Warn("acp: dropped a line from the agent", "why", why, "line", truncate(string(line), maxLogValue))
	}
}

// failure is why the stream was cut (ErrLineTooLong), nil otherwise.
func (f *frames) failure() error {
	if e := f.failed.Load(); e != nil {
		return *e
	}
	return nil
}
