package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// pathTool takes {"path": string} and fails quoting its path, as the file
// tools do.
type pathTool struct{}

func (pathTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "read", Description: "test tool", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)}
}

func (pathTool) Call(_ context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
	var a struct{ Path string }
	if err := json.Unmarshal(args, &a); err != nil {
		return "", err
	}
	return "", errors.New("no such file " + a.Path)
}

// sseEvent is one "data:" event of v as JSON.
func sseEvent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// Contract K3 (item 9 of issue 18): a hostile endpoint whose tool call
// carries a huge argument (a path of 4 MiB here; the was 15 MiB,
// which the race detector makes slow) costs an agent bounded memory: the
// failed call's error result echoes a prefix of the path, so the next
// request carries the argument once (in the assistant's tool call), not
// twice, and the heap's peak stays under 96 MiB (24 times the argument)
// above where it started. The endpoint's client library still copies what
// it decodes and encodes (about 15 times the argument at peak); echoing
// the whole path doubles the next request and took the peak to about 21
// times (404 MB for 15 MiB in the issue).
func TestK3_HugeToolArgumentCostsBoundedMemory(t *testing.T) {
	const argBytes = 4 << 20
	const ceiling = 96 << 20
	piece := strings.Repeat("x", 1<<20)
	var second atomic.Int64 // the second request's body size
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) []byte {
			return sseEvent(t, map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		}
		call := func(args string) map[string]any {
			return map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "read", "arguments": args}}}}
		}
		if requests.Add(1) == 1 {
			_, _ = w.Write(chunk(call(`{"path":"`), nil))
			for sent := 0; sent < argBytes; sent += len(piece) {
				if _, err := w.Write(chunk(call(piece), nil)); err != nil {
					return
				}
			}
			_, _ = w.Write(chunk(call(`"}`), "tool_calls"))
		} else {
			second.Store(n)
			_, _ = w.Write(chunk(map[string]any{"content": "done"}, "stop"))
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	model, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", HTTPClient: srv.Client(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(t.Context(), agent.Config{Model: model, Tools: []agent.Tool{pathTool{}}, Store: persistence.NewMemory(), Header: subagent.SessionHeader{SessionID: "s1"}})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := testkit.HeapPeak()
	res := a.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("go")}, nil)
	peak := stop()
	grown := int64(peak) - int64(before.HeapAlloc)
	t.Logf("a %d MiB argument: heap peak %+.1f MiB (ceiling %d MiB), second request %.1f MiB", argBytes>>20, float64(grown)/(1<<20), ceiling>>20, float64(second.Load())/(1<<20))
	if res.StopReason != subagent.Completed || subagent.TextOf(res.Output) != "done" {
		t.Fatalf("result %+v", res)
	}
	if n := second.Load(); n > argBytes+argBytes/2 {
		t.Errorf("the second request carries %d bytes for a %d-byte argument: the error result echoed it", n, argBytes)
	}
	if grown > ceiling {
		t.Errorf("the heap's peak grew by %.1f MiB, over the %d MiB ceiling", float64(grown)/(1<<20), ceiling>>20)
	}
}
