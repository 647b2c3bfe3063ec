package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

// ModelCallResult is the cost of one model call through model/openai's
// client against the local scripted server (internal/openaitest), beside a
// bare net/http request to the same server for the same streamed answer.
type ModelCallResult struct {
	Samples int          `json:"samples"`
	Client  Distribution `json:"client"`
	Bare    Distribution `json:"bare"`
	// OverheadMicros is the client's median minus the bare request's.
	OverheadMicros float64 `json:"overheadMicros"`
	// Bytes and allocations per call, each side measured in a run of its
	// own after the timed samples.
	ClientBytes  float64 `json:"clientBytesPerCall"`
	ClientAllocs float64 `json:"clientAllocsPerCall"`
	BareBytes    float64 `json:"bareBytesPerCall"`
	BareAllocs   float64 `json:"bareAllocsPerCall"`
}

// bareBody is the request the client sends for a one-message history with
// no tools, as the client's JSON writes it.
const bareBody = `{"messages":[{"content":"hi","role":"user"}],"model":"openaitest","stream_options":{"include_usage":true},"stream":true}`

// ModelCall alternates samples client calls and bare requests, each
// answered with a one-chunk streamed "hi", then counts allocations.
func ModelCall(ctx context.Context, samples int) (ModelCallResult, error) {
	const allocRuns = 200
	steps := make([]openaitest.Step, 2*(samples+allocRuns)+2)
	for i := range steps {
		steps[i] = openaitest.Reply("hi")
	}
	srv, err := openaitest.Listen("127.0.0.1:0", openaitest.Script{Steps: steps}, nil)
	if err != nil {
		return ModelCallResult{}, err
	}
	defer srv.Close()
	transport := &http.Transport{MaxIdleConnsPerHost: 4}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}
	client, err := openai.New(openai.Config{BaseURL: srv.URL, Model: openaitest.DefaultModel, HTTPClient: hc, MaxAttempts: 1})
	if err != nil {
		return ModelCallResult{}, err
	}
	req := agent.Request{Messages: []agent.Message{{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text("hi")}}}}
	call := func() error {
		resp, err := client.Generate(ctx, req)
		if err == nil && subagent.TextOf(resp.Message.Content) != "hi" {
			err = fmt.Errorf("client answered %+v", resp)
		}
		return err
	}
	url := srv.URL + "/chat/completions"
	bare := func() error {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(bareBody)))
		if err != nil {
			return err
		}
		r.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(r)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err == nil && (res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"hi"`))) {
			err = fmt.Errorf("bare request: %s: %s", res.Status, body)
		}
		return err
	}
	// One of each warms the connection and the client.
	if err := call(); err != nil {
		return ModelCallResult{}, err
	}
	if err := bare(); err != nil {
		return ModelCallResult{}, err
	}
	var tc, tb []time.Duration
	for i := range samples {
		for k := range 2 {
			f, d := call, &tc
			if (i+k)%2 == 1 {
				f, d = bare, &tb
			}
			t := time.Now()
			if err := f(); err != nil {
				return ModelCallResult{}, err
			}
			*d = append(*d, time.Since(t))
		}
	}
	r := ModelCallResult{Samples: samples, Client: distribution(tc), Bare: distribution(tb)}
	r.OverheadMicros = r.Client.P50 - r.Bare.P50
	var err2 error
	if r.ClientBytes, r.ClientAllocs, err2 = allocsPer(allocRuns, call); err2 != nil {
		return r, err2
	}
	if r.BareBytes, r.BareAllocs, err2 = allocsPer(allocRuns, bare); err2 != nil {
		return r, err2
	}
	return r, nil
}

// allocsPer runs f n times and returns the bytes and allocations per run,
// everything the process allocated meanwhile (the server's side included,
// alike for both).
func allocsPer(n int, f func() error) (bytes, allocs float64, err error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n), float64(after.Mallocs-before.Mallocs) / float64(n), nil
}
