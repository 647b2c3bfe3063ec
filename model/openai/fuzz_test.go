package openai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/openai"
)

// roundTrip is an http.RoundTripper from a function: the fuzz target's
// endpoint, in process.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// fuzzLimits are the small size limits the fuzz target reads streams with.
const fuzzBody, fuzzEvent = 512, 128

// generateFrom runs one Generate on an endpoint that answers body as an
// event stream, with the size limits given (the defaults when 0).
func generateFrom(t *testing.T, body []byte, maxBody, maxEvent int) (agent.Response, error) {
	t.Helper()
	c, err := openai.New(openai.Config{
		BaseURL: "http://fuzz.test/v1", Model: "m", MaxAttempts: 1,
		MaxReplyBytes: maxBody, MaxEventBytes: maxEvent,
		HTTPClient: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			_ = r.Body.Close()
			return &http.Response{
				StatusCode: http.StatusOK, Request: r,
				Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body:   io.NopCloser(bytes.NewReader(body)),
			}, nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.Generate(context.Background(), ask("hi"))
}

// longestEvent is the most bytes one event of body takes, the blank line
// that ends it included, by the lines the SDK's reader sees (split at
// "\n", one "\r" before it dropped).
func longestEvent(body []byte) int {
	longest, size := 0, 0
	lines := bytes.SplitAfter(body, []byte("\n"))
	for _, l := range lines {
		size += len(l)
		longest = max(longest, size)
		if blank := bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r")); len(blank) == 0 && bytes.HasSuffix(l, []byte("\n")) {
			size = 0
		}
	}
	return longest
}

// Contracts K3, M1: the SSE reader, fed any bytes as an endpoint's stream,
// ends with an answer or a typed error (*ProtocolError, *TooLargeError),
// never a panic or an untyped error; a *TooLargeError comes only from a
// body or an event over its limit, and a stream within the limits reads
// the same as with the defaults.
func FuzzSSEStream(f *testing.F) {
	for _, s := range []string{
		chunk("hi", "") + chunk(" there", "stop") + "data: [DONE]\n\n",
		": keep-alive\n\n" + chunk("x", "stop"),
		"data: {\"error\":{\"message\":\"upstream broke\"}}\n\n",
		"event: ping\ndata: {}\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
		strings.Repeat("data: x\n", 40),
		"data: {\"choices\":[{\"index\":0,\n\r\r\ndata: \"delta\":{}}]}\n\n",
		"\r\n\r\n\n\ndata: [DONE]\r\n\r\n",
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"a","function":{"name":"f","arguments":"{"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":-1}}` + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := generateFrom(t, body, fuzzBody, fuzzEvent)
		var perr *openai.ProtocolError
		var tooLarge *openai.TooLargeError
		switch {
		case err == nil, errors.As(err, &perr):
		case errors.As(err, &tooLarge):
			if tooLarge.Event && longestEvent(body) <= fuzzEvent || !tooLarge.Event && len(body) <= fuzzBody {
				t.Fatalf("%v on a body of %d bytes whose longest event has %d", err, len(body), longestEvent(body))
			}
			return
		default:
			t.Fatalf("untyped error %v (%T)", err, err)
		}
		if len(body) > fuzzBody || longestEvent(body) > fuzzEvent {
			return // read to its end before a limit was passed: fine either way
		}
		wantResp, wantErr := generateFrom(t, body, 0, 0)
		if !reflect.DeepEqual(resp, wantResp) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("within the limits: %+v, %v; with the defaults: %+v, %v", resp, err, wantResp, wantErr)
		}
	})
}
