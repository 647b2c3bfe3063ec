package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
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
		cfg.BaseURL = openAIBaseURL
	}
	if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if !validSchemaMode(cfg.OutputSchema) {
		return nil, fmt.Errorf("openai: OutputSchema %q is none of json_schema, json_object, prompt", cfg.OutputSchema)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.sleep == nil {
		cfg.sleep = sleep
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	orDefault(&cfg.MaxAttempts, 4)
	orDefault(&cfg.Backoff, 500*time.Millisecond)
	orDefault(&cfg.MaxBackoff, 30*time.Second)
	orDefault(&cfg.MaxRetryAfter, time.Minute)
	orDefault(&cfg.HeaderTimeout, DefaultHeaderTimeout)
	orDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	orDefault(&cfg.CallTimeout, DefaultCallTimeout)
	orDefault(&cfg.MaxReplyBytes, defaultMaxReplyBytes)
	orDefault(&cfg.MaxEventBytes, defaultMaxEventBytes)
	cfg.MaxEventBytes = min(cfg.MaxEventBytes, maxLine)
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

// orDefault sets *v to def when it is not positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Model is the model the client asks for.
func (c *Client) Model() string { return c.cfg.Model }

// Generate streams one answer to req. A 429 or 5xx status and a time
// limit passed are retried (Config.MaxAttempts, backoff honouring
// Retry-After); the error after the last attempt, or for any other status,
// is an *APIError or an error naming the limit. An answer that breaks the
// wire format or passes a size limit fails with an error saying so;
// neither is retried. req.OnText may have seen part of an attempt that
// timed out before the text of the next. When ctx ends, Generate returns
// ctx's error at once.
func (c *Client) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return agent.Response{}, err
	}
	var waits *backoff.ExponentialBackOff // made at the first retry
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, params, req.OnText)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return agent.Response{}, ctx.Err()
		}
		if waits == nil {
			waits = c.backoff()
		}
		wait, ok := c.retry(attempt, err, waits)
		if !ok {
			return agent.Response{}, err
		}
		if req.OnRetry != nil {
			req.OnRetry(attempt, err, wait)
		}
		if err := c.cfg.sleep(ctx, wait); err != nil {
			return agent.Response{}, err
		}
	}
}

// retry says whether the error of attempt number attempt is retried, and
// after what wait: Retry-After's, else the next of waits; it records the
// attempts in the error.
func (c *Client) retry(attempt int, err error, waits backoff.BackOff) (wait time.Duration, ok bool) {
	var apiErr *APIError
	var timeout *timeoutError
	switch {
	case errors.As(err, &apiErr):
		apiErr.Attempts = attempt
		if !apiErr.retryable() || attempt >= c.cfg.MaxAttempts {
			return 0, false
		}
		if apiErr.retryAfterSet {
			// A longer wait than we accept ends the call.
			return apiErr.RetryAfter, apiErr.RetryAfter <= c.cfg.MaxRetryAfter
		}
	case errors.As(err, &timeout):
		timeout.Attempts = attempt
		if attempt >= c.cfg.MaxAttempts {
			return 0, false
		}
	default:
		return 0, false
	}
	return waits.NextBackOff(), true
}

// backoff is one call's waits when the server does not say how long to
// wait: Backoff, doubled each retry up to MaxBackoff, each with jitter
// (±50%), so that clients that failed together do not all retry together.
func (c *Client) backoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     c.cfg.Backoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         c.cfg.MaxBackoff,
	}
}

// attempt makes one request and reads its stream, within the request's
// time limits (see Config.HeaderTimeout).
func (c *Client) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, onText func(string)) (agent.Response, error) {
	// Each limit ends the request's context with its *timeoutError as the
	// cause; the caller's ctx stays as it was.
	reqCtx, stop := context.WithTimeoutCause(ctx, c.cfg.CallTimeout, &timeoutError{Limit: limitCall, After: c.cfg.CallTimeout})
	defer stop()
	reqCtx, cancel := context.WithCancelCause(reqCtx)
	defer cancel(nil)
	headers := time.AfterFunc(c.cfg.HeaderTimeout, func() { cancel(&timeoutError{Limit: limitHeader, After: c.cfg.HeaderTimeout}) })
	defer headers.Stop()
	var idle *time.Timer // set once the headers are in, reset by every chunk
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()

	// The SDK turns an error status into its own error, which loses the
	// body when it is not JSON and never shows Retry-After; we keep both
	// from the raw response. A good response's body is read through the
	// size limits.
	var failed *APIError
	capture := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		headers.Stop()
		idle = time.AfterFunc(c.cfg.IdleTimeout, func() { cancel(&timeoutError{Limit: limitIdle, After: c.cfg.IdleTimeout}) })
		if err != nil {
			return res, err
		}
		if res.StatusCode < 400 {
			res.Body = &cappedBody{ReadCloser: res.Body, maxBody: c.cfg.MaxReplyBytes, maxEvent: c.cfg.MaxEventBytes}
			return res, nil
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody)) // a short read keeps what came
		_ = res.Body.Close()
		failed = &APIError{Status: res.StatusCode, Body: string(body)}
		failed.RetryAfter, failed.retryAfterSet = retryAfter(res.Header, c.cfg.now())
		res.Body = io.NopCloser(bytes.NewReader(body))
		return res, nil
	})
	stream := c.svc.NewStreaming(reqCtx, params, capture)
	defer stream.Close()
	if failed != nil {
		return agent.Response{}, failed
	}
	r := newReply(onText)
	for stream.Next() {
		idle.Reset(c.cfg.IdleTimeout)
		r.add(stream.Current())
	}
	if ctx.Err() != nil {
		return agent.Response{}, ctx.Err()
	}
	if err := stream.Err(); err != nil {
		var timeout *timeoutError
		if errors.As(context.Cause(reqCtx), &timeout) {
			return agent.Response{}, timeout
		}
		return agent.Response{}, streamError(err)
	}
	return r.response()
}

// streamError classifies an error from the stream or the request.
func streamError(err error) error {
	var se *ssestream.StreamError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooLarge *tooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return tooLarge
	case errors.As(err, &se):
		return &protocolError{Detail: "error event in stream", Err: errors.New(string(bytes.TrimSpace(se.Event.Data)))}
	case errors.As(err, &syntax), errors.As(err, &typ):
		return &protocolError{Detail: "malformed chunk", Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &protocolError{Detail: "stream cut off", Err: err}
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

// sleep is the real Config.sleep.
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
