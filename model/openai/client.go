package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/subactor/subactor/agent"
)

// Client is an agent.Model on one endpoint. It is safe for concurrent use.
type Client struct {
	cfg Config
	svc sdk.ChatCompletionService
}

var _ agent.Model = (*Client)(nil)

// New returns a client for cfg. It fails without a model or with a base URL
// that is not an absolute http(s) URL; it contacts nothing.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" {
		return nil, ErrNoModel
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = OpenAIBaseURL
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = time.Minute
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxReplyBytes <= 0 {
		cfg.MaxReplyBytes = 16 << 20
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // ours are the only retries
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// The chat service alone, not sdk.NewClient: NewClient also reads
	// OPENAI_* from the process environment, and a Config must mean the
	// same wherever it runs.
	return &Client{cfg: cfg, svc: sdk.NewChatCompletionService(opts...)}, nil
}

// Model is the model the client asks for.
func (c *Client) Model() string { return c.cfg.Model }

// Generate streams one answer to req. A 429 or 5xx status is retried
// (Config.MaxAttempts, backoff honouring Retry-After); the error after the
// last attempt, or for any other status, is an *APIError. An answer that
// breaks the wire format is a *ProtocolError; it is not retried. When ctx
// ends, Generate returns ctx's error at once.
func (c *Client) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, params, req.OnText)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return agent.Response{}, ctx.Err()
		}
		var apiErr *APIError
		if !errors.As(err, &apiErr) {
			return agent.Response{}, err
		}
		apiErr.Attempts = attempt
		if !apiErr.Retryable() || attempt >= c.cfg.MaxAttempts {
			return agent.Response{}, apiErr
		}
		wait, ok := c.backoff(attempt, apiErr)
		if !ok {
			return agent.Response{}, apiErr
		}
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return agent.Response{}, err
		}
	}
}

// backoff is the wait before retry number attempt; ok is false when the
// server asked for a longer wait than we accept.
func (c *Client) backoff(attempt int, e *APIError) (wait time.Duration, ok bool) {
	if e.retryAfterSet {
		return e.RetryAfter, e.RetryAfter <= c.cfg.MaxRetryAfter
	}
	wait = c.cfg.Backoff
	for i := 1; i < attempt && wait < c.cfg.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, c.cfg.MaxBackoff)
	// Jitter in [wait/2, wait], so that clients that failed together do
	// not all retry together.
	return wait/2 + rand.N(wait/2+1), true
}

// attempt makes one request and reads its stream.
func (c *Client) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, onText func(string)) (agent.Response, error) {
	// The SDK turns an error status into its own error, which loses the
	// body when it is not JSON and never shows Retry-After; we keep both
	// from the raw response.
	var failed *APIError
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if err != nil || res.StatusCode < 400 {
			return res, err
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody)) // a short read keeps what came
		_ = res.Body.Close()
		failed = &APIError{Status: res.StatusCode, Body: string(body)}
		failed.RetryAfter, failed.retryAfterSet = retryAfter(res.Header, c.cfg.Now())
		res.Body = io.NopCloser(bytes.NewReader(body))
		return res, nil
	})
	stream := c.svc.NewStreaming(ctx, params, capture)
	defer stream.Close()
	if failed != nil {
		return agent.Response{}, failed
	}
	r := newReply(c.cfg.MaxReplyBytes, onText)
	for stream.Next() {
		if err := r.add(stream.Current()); err != nil {
			return agent.Response{}, err
		}
	}
	if ctx.Err() != nil {
		return agent.Response{}, ctx.Err()
	}
	if err := stream.Err(); err != nil {
		return agent.Response{}, streamError(err)
	}
	return r.response()
}

// streamError classifies an error from the stream or the request.
func streamError(err error) error {
	var se *ssestream.StreamError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &ProtocolError{Detail: "error event in stream", Err: errors.New(string(bytes.TrimSpace(se.Event.Data)))}
	case errors.As(err, &syntax), errors.As(err, &typ):
		return &ProtocolError{Detail: "malformed chunk", Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ProtocolError{Detail: "stream cut off", Err: err}
	}
	return fmt.Errorf("openai: %w", err)
}

// retryAfter reads how long the server asks us to wait: retry-after-ms
// (OpenAI's, in milliseconds), or Retry-After in seconds or as an HTTP date
// measured from now.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e9 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// sleep is the real Config.Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
