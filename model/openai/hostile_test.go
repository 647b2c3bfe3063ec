package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

// Hostile endpoints (K3): what an endpoint sends is bounded in memory and
// in time, and ends with a typed error saying what was wrong.

// chunk is one chat completion chunk event with text and, when set, a
// finish reason.
func chunk(text, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":%s}]}`+"\n\n", text, f)
}

// streamHeaders starts a 200 event stream and flushes it, so that the
// client has its headers.
func streamHeaders(w http.ResponseWriter) *http.ResponseController {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return rc
}

// Contract K3: one event that never ends (data lines without the blank
// line that ends an event, or one endless line) is cut at
// DefaultMaxEventBytes with a *TooLargeError that says so plainly (not
// "bufio.Scanner: token too long"), and the client's memory stays bounded:
// all it allocates during the call (runtime.MemStats.TotalAlloc, the
// in-process server's writes included) stays under 64 MiB while the server
// offers 128 MiB. Without the limit the client keeps the whole event.
func TestK3_EndlessEventIsCutAndMemoryStaysBounded(t *testing.T) {
	const offered = 128 << 20
	const ceiling = 64 << 20
	for _, c := range []struct {
		name string
		line []byte // written again and again
	}{
		{"data lines without a blank line", []byte("data: " + strings.Repeat("x", 1018) + "\n")},
		{"one line without end (100 MB and more)", append([]byte("data: "), bytes.Repeat([]byte("x"), 1<<20)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				streamHeaders(w)
				for sent := 0; sent < offered; sent += len(c.line) {
					if _, err := w.Write(c.line); err != nil {
						return // the client hung up
					}
				}
			}))
			defer srv.Close()
			cl, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", HTTPClient: srv.Client(), MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = cl.Generate(testkit.Ctx(t), ask("hi"))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %.1f MiB during the call (ceiling %d MiB)", float64(alloc)/(1<<20), ceiling>>20)
			if alloc > ceiling {
				t.Errorf("the call allocated %d MiB, over the %d MiB ceiling", alloc>>20, ceiling>>20)
			}
			var tooLarge *openai.TooLargeError
			if !errors.As(err, &tooLarge) || !tooLarge.Event || tooLarge.Limit != openai.DefaultMaxEventBytes {
				t.Fatalf("error %v (%T), want a *TooLargeError for one event over %d bytes", err, err, openai.DefaultMaxEventBytes)
			}
			if msg := err.Error(); strings.Contains(msg, "bufio") || !strings.Contains(msg, "one event of the answer stream is over") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// Contract K3: a body of many well-formed chunks is cut at MaxReplyBytes
// of raw bytes, keep-alive comments included, with a *TooLargeError that
// is not retried.
func TestK3_AnswerOverLimitIsTooLarge(t *testing.T) {
	s := openaitest.NewServer(t, openaitest.Step{Text: strings.Repeat("x", 4096), ChunkSize: 64})
	c, clk := client(t, s, func(cfg *openai.Config) { cfg.MaxReplyBytes = 1024 })
	_, err := c.Generate(testkit.Ctx(t), ask("hi"))
	var tooLarge *openai.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Event || tooLarge.Limit != 1024 || err.Error() != "openai: the answer is over 1024 bytes" {
		t.Errorf("error %v, want a *TooLargeError for the answer over 1024 bytes", err)
	}

	// Comments count: they are bytes the server sends.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		for range 200 {
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, chunk("late", "stop")+"data: [DONE]\n\n")
	}))
	defer srv.Close()
	c, err = openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", HTTPClient: srv.Client(), MaxReplyBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(testkit.Ctx(t), ask("hi")); !errors.As(err, &tooLarge) {
		t.Errorf("2800 bytes of keep-alives: error %v, want a *TooLargeError", err)
	}
	if len(clk.Waits()) != 0 {
		t.Errorf("retried: %v", clk.Waits())
	}
}

// Contract K3: token counts no model reports (negative, or in the
// billions) are a *ProtocolError naming the field, never shown as usage.
func TestK3_AbsurdTokenCountsAreProtocolErrors(t *testing.T) {
	s := openaitest.NewServer(t,
		openaitest.Step{Text: "x", Usage: &openaitest.Usage{PromptTokens: -5, CompletionTokens: 3}},
		openaitest.Step{Text: "x", Usage: &openaitest.Usage{PromptTokens: 5, CompletionTokens: 1 << 40}},
		openaitest.Step{Text: "x", Usage: &openaitest.Usage{PromptTokens: 5, CompletionTokens: 3, CachedTokens: -1}},
	)
	c, _ := client(t, s)
	for _, want := range []string{"prompt_tokens = -5", "completion_tokens = 1099511627776", "cached_tokens = -1"} {
		resp, err := c.Generate(testkit.Ctx(t), ask("hi"))
		var perr *openai.ProtocolError
		if !errors.As(err, &perr) || !strings.Contains(err.Error(), want) || resp.Usage != (subagent.Usage{}) {
			t.Errorf("error %v, response %+v; want a *ProtocolError saying %q", err, resp, want)
		}
	}
}

// pipeNet is an in-memory network for an httptest server inside a
// synctest bubble: its connections are net.Pipe ends, so that a handler or
// a client blocked on one is durably blocked and the bubble's clock moves
// on to the next timer at once.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

func (n *pipeNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (n *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		return client, nil
	case <-n.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "endpoint.test:80" }

// slowEndpoint serves h with an httptest server on a pipeNet, in the
// calling synctest bubble, and returns a client configuration for it with
// the default time limits and one attempt; requests counts the requests.
func slowEndpoint(t *testing.T, h http.HandlerFunc) (cfg openai.Config, requests *atomic.Int32) {
	requests = new(atomic.Int32)
	ln := &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		// Read to the end, so that the server watches the connection and
		// ends r's context when the client hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		h(w, r)
	})}}
	srv.Start()
	tr := &http.Transport{DialContext: ln.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return openai.Config{BaseURL: srv.URL + "/v1", Model: "m", HTTPClient: &http.Client{Transport: tr}, MaxAttempts: 1}, requests
}

// timeout runs one Generate on cfg and checks that it fails with a
// *TimeoutError for limit after attempts, elapsed (fake) time after the
// call began.
func timeout(t *testing.T, cfg openai.Config, limit string, after time.Duration, attempts int, elapsed time.Duration) {
	t.Helper()
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Generate(context.Background(), ask("hi"))
	var te *openai.TimeoutError
	if !errors.As(err, &te) || te.Limit != limit || te.After != after || te.Attempts != attempts {
		t.Fatalf("error %v (%T), want a *TimeoutError for the %s limit of %v after %d attempts", err, err, limit, after, attempts)
	}
	if got := time.Since(start); got != elapsed {
		t.Errorf("ended after %v, want %v", got, elapsed)
	}
}

// Contracts K3, M1: an endpoint that never sends its response headers is
// given up at DefaultHeaderTimeout with a *TimeoutError, which is retried
// with backoff like a 5xx: here two attempts stall and the third answers.
func TestK3_M1_EndpointWithoutHeadersTimesOutAndIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		cfg, requests := slowEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				<-r.Context().Done() // never a header
				return
			}
			streamHeaders(w)
			_, _ = io.WriteString(w, chunk("at last", "stop")+"data: [DONE]\n\n")
		})
		cfg.MaxAttempts = 3
		var waits []time.Duration
		openai.SetSleep(&cfg, func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			time.Sleep(d)
			return nil
		})
		c, err := openai.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := c.Generate(context.Background(), ask("hi"))
		if err != nil || resp.Message.Content[0].Text != "at last" {
			t.Fatalf("%+v, %v; want the third attempt's answer", resp, err)
		}
		if got, want := time.Since(start), 2*openai.DefaultHeaderTimeout+waits[0]+waits[1]; len(waits) != 2 || got != want || requests.Load() != 3 {
			t.Errorf("took %v with waits %v and %d requests; want two header timeouts and two backoff waits (%v), 3 requests", got, waits, requests.Load(), want)
		}

		// The budget spent: the last attempt's *TimeoutError.
		n.Store(-10)
		cfg.MaxAttempts = 2
		openai.SetSleep(&cfg, nil)
		cfg.Backoff, cfg.MaxBackoff = time.Second, time.Second // jitter in [0.5s, 1.5s]
		c, _ = openai.New(cfg)
		start = time.Now()
		_, err = c.Generate(context.Background(), ask("hi"))
		var te *openai.TimeoutError
		if !errors.As(err, &te) || te.Limit != "header" || te.Attempts != 2 ||
			err.Error() != "openai: the endpoint sent no response headers within 5m0s (after 2 attempts)" {
			t.Fatalf("error %v, want the header *TimeoutError after 2 attempts", err)
		}
		if got := time.Since(start) - 2*openai.DefaultHeaderTimeout; got < 500*time.Millisecond || got > 1500*time.Millisecond {
			t.Errorf("waited %v between the attempts, want the backoff", got)
		}
	})
}

// Contracts K3, M1: an endpoint that sends its headers and then only
// keep-alive comments is given up DefaultIdleTimeout after the headers:
// comments show a live connection, not progress.
func TestK3_M1_KeepAlivesOnlyTimeOutAtIdleLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := slowEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			rc := streamHeaders(w)
			tick := time.NewTicker(15 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
						return
					}
					_ = rc.Flush()
				case <-r.Context().Done():
					return
				}
			}
		})
		timeout(t, cfg, "idle", openai.DefaultIdleTimeout, 1, openai.DefaultIdleTimeout)
	})
}

// Contracts K3, M1: an endpoint that trickles a byte every 0.5 s, never
// completing an event, is given up DefaultIdleTimeout after the headers:
// bytes are not chunks.
func TestK3_M1_ByteTrickleTimesOutAtIdleLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := slowEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			rc := streamHeaders(w)
			_, _ = io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"content":"`)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					if _, err := io.WriteString(w, "x"); err != nil {
						return
					}
					_ = rc.Flush()
				case <-r.Context().Done():
					return
				}
			}
		})
		timeout(t, cfg, "idle", openai.DefaultIdleTimeout, 1, openai.DefaultIdleTimeout)
	})
}

// Contracts K3, M1: an endpoint that sends a chunk every 0.5 s without
// end keeps the idle limit at bay (each chunk restarts it) and is given up
// at the call limit; the limits come from the Config.
func TestK3_M1_EndlessChunksTimeOutAtCallLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := slowEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
			rc := streamHeaders(w)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					if _, err := io.WriteString(w, chunk("more ", "")); err != nil {
						return
					}
					_ = rc.Flush()
				case <-r.Context().Done():
					return
				}
			}
		})
		cfg.IdleTimeout, cfg.CallTimeout = 2*time.Second, time.Minute
		timeout(t, cfg, "call", time.Minute, 1, time.Minute)
	})
}
