package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// ErrNoModel is a Config without a model.
var ErrNoModel = errors.New("openai: no model configured")

// APIError is an HTTP error status from the endpoint: at once for a status
// that is not retried (400, 401, 404, ...), after the last attempt for 429
// and 5xx. Match it with errors.As.
type APIError struct {
	Status int
	// Body is the response body, cut at maxErrorBody bytes.
	Body string
	// RetryAfter is what the last response's Retry-After asked for, 0 when
	// it had none.
	RetryAfter time.Duration
	// Attempts is the number of requests the call made.
	Attempts int

	retryAfterSet bool // RetryAfter came from the response
}

// maxErrorBody bounds what an error keeps of a body.
const maxErrorBody = 8 << 10

func (e *APIError) Error() string {
	msg := e.Body
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(e.Body), &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	msg = cut(msg, 200)
	s := fmt.Sprintf("openai: %d %s", e.Status, http.StatusText(e.Status))
	if msg != "" {
		s += ": " + msg
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// retryable says whether the status is one a call retries (429 and 5xx).
func (e *APIError) retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// protocolError is an answer that does not follow the chat completions
// wire format: a malformed body or chunk, an error event inside the stream,
// a stream cut off before its finish reason (a dropped connection), an
// unknown finish reason, or token counts no model reports (negative, or
// beyond maxTokenCount). It is not retried: part of the answer may have
// been produced already.
type protocolError struct {
	Detail string
	Err    error // the underlying error, if any
}

func (e *protocolError) Error() string {
	if e.Err != nil {
		return "openai: " + e.Detail + ": " + e.Err.Error()
	}
	return "openai: " + e.Detail
}

func (e *protocolError) Unwrap() error { return e.Err }

// tooLargeError is a streamed answer over a size limit: its raw body over
// Config.MaxReplyBytes, or one event of its stream (the lines up to the
// blank line that ends it) over Config.MaxEventBytes. The read stops at
// the limit, so that a hostile or broken server cannot exhaust memory. It
// is not retried.
type tooLargeError struct {
	// Event is true when one event passed MaxEventBytes, false when the
	// body passed MaxReplyBytes.
	Event bool
	Limit int // the limit passed, in bytes
}

func (e *tooLargeError) Error() string {
	if e.Event {
		return fmt.Sprintf("openai: one event of the answer stream is over %d bytes (a line or event without end?)", e.Limit)
	}
	return fmt.Sprintf("openai: the answer is over %d bytes", e.Limit)
}

// A request's time limits, as timeoutError.Limit names them.
const (
	limitHeader = "header" // the response headers are due
	limitIdle   = "idle"   // the stream's next chunk is due
	limitCall   = "call"   // the whole request is due
)

// timeoutError is a request the endpoint was too slow to answer: no
// response headers within Config.HeaderTimeout, no chunk of the stream
// within Config.IdleTimeout of the headers or of the chunk before
// (keep-alive comments do not count), or no end within
// Config.CallTimeout. It is retried like a 5xx status; after the last
// attempt the call fails with it.
type timeoutError struct {
	// Limit names the limit that passed: "header" (Config.HeaderTimeout),
	// "idle" (Config.IdleTimeout) or "call" (Config.CallTimeout).
	Limit string
	After time.Duration // the limit's value
	// Attempts is the number of requests the call made.
	Attempts int
}

func (e *timeoutError) Error() string {
	var s string
	switch e.Limit {
	case limitHeader:
		s = fmt.Sprintf("openai: the endpoint sent no response headers within %v", e.After)
	case limitIdle:
		s = fmt.Sprintf("openai: the endpoint's stream sent no chunk for %v", e.After)
	default:
		s = fmt.Sprintf("openai: the endpoint's answer did not end within %v", e.After)
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
