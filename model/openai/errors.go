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

// Retryable says whether the status is one a call retries (429 and 5xx).
func (e *APIError) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ProtocolError is an answer that does not follow the chat completions
// wire format: a malformed body or chunk, an error event inside the stream,
// a stream cut off before its finish reason (a dropped connection), an
// unknown finish reason, or an answer over Config.MaxReplyBytes. It is not
// retried: part of the answer may have been produced already.
type ProtocolError struct {
	Detail string
	Err    error // the underlying error, if any
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return "openai: " + e.Detail + ": " + e.Err.Error()
	}
	return "openai: " + e.Detail
}

func (e *ProtocolError) Unwrap() error { return e.Err }

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
