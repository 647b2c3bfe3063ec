package main

// The frames an ACP client sends node acp pass a gate before the SDK's
// connection reads them (K3): a frame over maxACPFrame is dropped and
// answered with an error instead of ending the connection (the SDK's
// reader stops at its 10 MiB line), requests past a rate are refused, and
// a session takes one prompt at a time: the SDK would cancel the running
// one when a second arrives, the gate refuses the second instead.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	acp "github.com/coder/acp-go-sdk"
	"golang.org/x/time/rate"
)

// Bounds of the gate.
const (
	// maxACPFrame is the longest frame (one JSON-RPC message, one line)
	// read from an ACP client: below the SDK's 10 MiB line, room for a
	// prompt of maxPromptBytes escaped.
	maxACPFrame = 8 << 20
	// requestRate and requestBurst bound a client's requests: a burst of
	// requestBurst, then requestRate a second. A notification past the
	// rate waits (a session/cancel is never lost).
	requestRate  = 50
	requestBurst = 100
)

// lockedWriter is the client's output, shared by the SDK's connection
// (one whole message per Write) and the gate's refusals.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// acpGate passes a client's frames to the SDK's connection.
type acpGate struct {
	out *lockedWriter
	log *slog.Logger
	lim *rate.Limiter

	mu      sync.Mutex
	prompts map[acp.SessionId]bool // sessions with a prompt admitted and not yet answered
}

func newACPGate(out io.Writer, log *slog.Logger) *acpGate {
	return &acpGate{out: &lockedWriter{w: out}, log: log, lim: rate.NewLimiter(requestRate, requestBurst), prompts: map[acp.SessionId]bool{}}
}

// reader is what the SDK's connection reads: in's frames that passed,
// until in ends or ctx does.
func (g *acpGate) reader(ctx context.Context, in io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(g.pass(ctx, bufio.NewReaderSize(in, 64<<10), pw))
	}()
	return pr
}

// pass reads frames from in and writes those that pass to w.
func (g *acpGate) pass(ctx context.Context, in *bufio.Reader, w io.Writer) error {
	var buf []byte
	for {
		line, tooLong, err := readFrame(in, maxACPFrame, buf[:0])
		buf = line
		if tooLong {
			g.log.Warn("acp: dropped a frame of the client over the limit", "limit", maxACPFrame)
			g.refuse(nil, acp.NewInvalidRequest(map[string]any{"error": fmt.Sprintf("a frame over %d bytes was dropped", maxACPFrame)}))
		} else if len(line) > 0 && g.admit(ctx, line) {
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readFrame reads one line into buf, at most max bytes of it: a longer
// one is read to its end and dropped (tooLong). The line keeps its
// newline.
func readFrame(r *bufio.Reader, max int, buf []byte) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong && len(buf)+len(chunk) > max {
			tooLong, buf = true, buf[:0]
		}
		if !tooLong {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

// frameHead is what the gate reads of a frame.
type frameHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// admit decides whether line goes on to the SDK: answers and what does
// not parse go on (the SDK deals with them); a request past the rate, or
// a prompt to a session that has one running, is refused here.
func (g *acpGate) admit(ctx context.Context, line []byte) bool {
	var h frameHead
	if json.Unmarshal(line, &h) != nil || h.Method == "" {
		return true
	}
	if len(h.ID) == 0 || string(h.ID) == "null" {
		// A notification waits for the rate rather than being lost.
		return g.lim.Wait(ctx) == nil
	}
	if !g.lim.Allow() {
		g.refuse(h.ID, acp.NewInvalidRequest(map[string]any{"error": fmt.Sprintf("over %d requests a second (a burst of %d): retry later", requestRate, requestBurst)}))
		return false
	}
	if h.Method != acp.AgentMethodSessionPrompt {
		return true
	}
	var p acp.PromptRequest
	if json.Unmarshal(h.Params, &p) != nil || p.Validate() != nil {
		return true // the SDK refuses it before any prompt starts
	}
	g.mu.Lock()
	busy := g.prompts[p.SessionId]
	if !busy {
		g.prompts[p.SessionId] = true
	}
	g.mu.Unlock()
	if busy {
		g.refuse(h.ID, acp.NewInvalidRequest(map[string]any{"error": fmt.Sprintf("session %s has a prompt running: wait for its answer, or session/cancel it first", p.SessionId)}))
		return false
	}
	return true
}

// promptEnded lets session take a prompt again: the agent's Prompt calls
// it before it answers.
func (g *acpGate) promptEnded(session acp.SessionId) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.prompts, session)
}

// refuse answers request id (null when unknown) with rerr.
func (g *acpGate) refuse(id json.RawMessage, rerr *acp.RequestError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg, err := json.Marshal(struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      json.RawMessage   `json:"id"`
		Error   *acp.RequestError `json:"error"`
	}{"2.0", id, rerr})
	if err == nil {
		_, _ = g.out.Write(append(msg, '\n'))
	}
}
