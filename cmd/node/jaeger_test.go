package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
)

// jaegerConfig runs Jaeger v2 with memory storage, receiving OTLP over
// HTTP and answering queries, every port on loopback (%d: OTLP, query
// HTTP, query gRPC, health), no metrics endpoint.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%[2]d
    grpc:
      endpoint: 127.0.0.1:%[3]d
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%[4]d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// jaeger is a Jaeger v2 process the test started.
type jaeger struct {
	otlp, query string // base URLs
}

// startJaeger starts Jaeger (v1.75.0, installed by .ci/run from
// tools/jaeger) on free loopback ports and waits until it is healthy; it
// is stopped when the test ends. Without it the test skips, and fails in
// CI.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	exe, err := exec.LookPath("jaeger")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("jaeger is not installed (.ci/run builds it from tools/jaeger)")
		}
		t.Skip("jaeger is not installed (cd tools/jaeger && go build -o $(go env GOPATH)/bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger)")
	}
	p, err := clustertest.PortPair()
	if err != nil {
		t.Fatal(err)
	}
	q, err := clustertest.PortPair()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, jaegerConfig, p, p+1, q, q+1), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := new(testkit.Buffer)
	cmd := exec.Command(exe, "--config", config)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	health := fmt.Sprintf("http://127.0.0.1:%d/status", q+1)
	poll(t, "Jaeger to be healthy", func() bool {
		select {
		case <-exited:
			t.Fatalf("jaeger exited: %s", logs.String())
		default:
		}
		resp, err := http.Get(health)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &jaeger{otlp: fmt.Sprintf("http://127.0.0.1:%d", p), query: fmt.Sprintf("http://127.0.0.1:%d", p+1)}
}

// poll calls ok every 50 ms until it holds, failing the test by what it
// waited for after testkit.Deadline.
func poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(testkit.Deadline)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-deadline:
			t.Fatalf("waited %s for %s", testkit.Deadline, what)
		case <-tick.C:
		}
	}
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces) gives it.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
}

// traces are the traces of service Jaeger holds.
func (j *jaeger) traces(t *testing.T, service string) []jaegerTrace {
	t.Helper()
	resp, err := http.Get(j.query + "/api/traces?limit=20&service=" + service)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query API: %v", err)
	}
	return body.Data
}

// Contract O1 end to end, against a real trace backend: node run with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at Jaeger exports its tree, and
// Jaeger's query API gives it back as one trace whose one root is the top
// agent's run, every child's run span a child of the subagent tool call
// that delegated it, and the chat spans carrying their usage (O2).
func TestO1_JaegerShowsTheDelegationTree(t *testing.T) {
	j := startJaeger(t)
	root := writeTree(t)
	_, folders := expected(t, root, ".")
	top := 0
	for _, f := range folders {
		if !strings.Contains(f, "/") {
			top++
		}
	}
	service := "subactor-e2e"
	_, stderr, code := nodeEnv(t, root, []string{
		envDataDir + "=" + t.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlp,
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_METRICS_EXPORTER=none", // Jaeger takes traces only
	}, "run")
	if code != 0 || strings.Contains(stderr, "export") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// Jaeger stores what it received in batches: wait until the tree
	// is in (a run span per child besides the top's).
	var tr jaegerTrace
	runs := func(tr jaegerTrace) int {
		n := 0
		for _, s := range tr.Spans {
			if strings.HasPrefix(s.OperationName, "invoke_agent ") {
				n++
			}
		}
		return n
	}
	poll(t, "Jaeger to hold the whole tree", func() bool {
		ts := j.traces(t, service)
		if len(ts) > 1 {
			t.Fatalf("%d traces for one run, want one (O1)", len(ts))
		}
		if len(ts) == 1 && runs(ts[0]) == top+1 {
			tr = ts[0]
			return true
		}
		return false
	})
	byID := map[string]int{}
	for i, s := range tr.Spans {
		byID[s.SpanID] = i
	}
	roots, children, chats := 0, 0, 0
	for _, s := range tr.Spans {
		if len(s.References) == 0 {
			roots++
			if !strings.HasPrefix(s.OperationName, "invoke_agent ") {
				t.Errorf("the root is %q, not the top agent's run", s.OperationName)
			}
			continue
		}
		ref := s.References[0]
		i, ok := byID[ref.SpanID]
		if ref.RefType != "CHILD_OF" || ref.TraceID != tr.TraceID || !ok {
			t.Fatalf("span %q refers to %+v, not a span of its trace", s.OperationName, ref)
		}
		switch {
		case strings.HasPrefix(s.OperationName, "invoke_agent "):
			children++
			if parent := tr.Spans[i].OperationName; parent != "execute_tool subagent" {
				t.Errorf("child run %q is under %q, not the subagent tool call", s.OperationName, parent)
			}
		case strings.HasPrefix(s.OperationName, "chat "):
			chats++
			tokens := 0
			for _, tag := range s.Tags {
				if tag.Key == "gen_ai.usage.input_tokens" || tag.Key == "gen_ai.usage.output_tokens" {
					tokens++
				}
			}
			if tokens != 2 {
				t.Errorf("chat span without its usage: %+v", s.Tags)
			}
		}
	}
	if roots != 1 || children != top || chats == 0 {
		t.Fatalf("%d roots, %d child runs, %d chats; want 1, %d and some", roots, children, chats, top)
	}
	t.Logf("trace %s: %d spans, %d child runs, %d chats", tr.TraceID, len(tr.Spans), children, chats)
}
