package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/internal/testkit"
)

// otlpReceiver is an OTLP/HTTP receiver of traces and metrics on
// loopback: what the node exported, span by span and metric by metric,
// with its resource's service.name. (Jaeger, the trace backend of the
// end-to-end test, takes no metrics.)
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricpb.Metric
	service []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	c := &otlpReceiver{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil && r.URL.Path == "/v1/metrics" {
			c.takeMetrics(w, body)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					c.service = append(c.service, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// takeMetrics answers a metric export whose body is body.
func (c *otlpReceiver) takeMetrics(w http.ResponseWriter, body []byte) {
	var req colmetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			c.metrics = append(c.metrics, sm.Metrics...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// metricsNamed are the exported metrics named name (one an export).
func (c *otlpReceiver) metricsNamed(name string) []*metricpb.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ms []*metricpb.Metric
	for _, m := range c.metrics {
		if m.Name == name {
			ms = append(ms, m)
		}
	}
	return ms
}

func (c *otlpReceiver) exported() ([]*tracepb.Span, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans), slices.Clone(c.service)
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// Contract O1 through the node: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// node run exports its whole delegation tree over OTLP before it exits,
// as one trace: the top agent's run span is the only root, and each
// child's run span is under the subagent tool call that delegated it;
// OTEL_SERVICE_NAME names the service.
func TestO1_NodeExportsTheTreeOverOTLP(t *testing.T) {
	c := newOTLPReceiver(t)
	root := writeTree(t)
	_, folders := expected(t, root, ".")
	_, stderr, code := nodeEnv(t, root, []string{
		envDataDir + "=" + t.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.URL,
		"OTEL_SERVICE_NAME=tree-test",
	}, "run")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "trace export") {
		t.Fatalf("the export complained:\n%s", stderr)
	}
	spans, services := c.exported()
	if len(spans) == 0 {
		t.Fatal("no span reached the receiver before the node exited")
	}
	for _, s := range services {
		if s != "tree-test" {
			t.Fatalf("service.name %q, want OTEL_SERVICE_NAME's", s)
		}
	}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
		if string(s.TraceId) != string(spans[0].TraceId) {
			t.Fatalf("span %q in another trace: one trace per tree (O1)", s.Name)
		}
	}
	var roots, children int
	for _, s := range spans {
		if len(s.ParentSpanId) == 0 {
			roots++
			if spanAttr(s, "gen_ai.operation.name") != "invoke_agent" {
				t.Errorf("the root is %q, not the top agent's run", s.Name)
			}
			continue
		}
		if byID[string(s.ParentSpanId)] == nil {
			t.Errorf("span %q: its parent was not exported", s.Name)
		}
		if spanAttr(s, "gen_ai.operation.name") == "invoke_agent" {
			children++
			if call := byID[string(s.ParentSpanId)]; call == nil || call.Name != "execute_tool subagent" {
				t.Errorf("child run span %q is not under a subagent tool call", s.Name)
			}
		}
	}
	// One child per top-level folder (the tally children do not delegate).
	top := 0
	for _, f := range folders {
		if !strings.Contains(f, "/") {
			top++
		}
	}
	if roots != 1 || children != top {
		t.Fatalf("%d roots and %d child runs, want 1 and %d (folders %v)", roots, children, top, folders)
	}
}

// Contract O4 through the node: a collector that refuses connections
// neither fails nor slows a run (the best of several runs, each way,
// stays within 10% and a few milliseconds of process start), and the
// failure is told once.
func TestO4_UnreachableCollectorNeitherFailsNorSlowsARun(t *testing.T) {
	root := writeTree(t)
	// A port nothing listens on: a receiver's, closed.
	c := newOTLPReceiver(t)
	endpoint := c.URL
	c.Close()
	best := func(env ...string) (time.Duration, string) {
		var fastest time.Duration
		var stderr string
		for range 5 {
			begun := time.Now()
			_, errOut, code := nodeEnv(t, root, append([]string{envDataDir + "=" + t.TempDir()}, env...), "run", "-quiet")
			took := time.Since(begun)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			if fastest == 0 || took < fastest {
				fastest = took
			}
			stderr = errOut
		}
		return fastest, stderr
	}
	off, _ := best()
	on, stderr := best("OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint)
	if n := strings.Count(stderr, "trace export failed"); n != 1 {
		t.Errorf("the failure is told %d times, want once:\n%s", n, stderr)
	}
	if n := strings.Count(stderr, "metric export failed"); n != 1 {
		t.Errorf("the metrics' failure is told %d times, want once:\n%s", n, stderr)
	}
	if limit := off + off/10 + 15*time.Millisecond; on > limit {
		t.Fatalf("a run took %s with an unreachable collector, %s without (limit %s)", on, off, limit)
	}
	t.Logf("best of 5: %s off, %s with an unreachable collector", off, on)
}

// Contract O1 on the way out: Ctrl-C mid-run still exports the run's
// spans before the node exits (130): the ACP child's run span, a CLIENT
// span, ended aborted; and its metrics (O2): the run counted as started.
func TestO1_SpansAreFlushedAfterCtrlC(t *testing.T) {
	rcv := newOTLPReceiver(t)
	cmd := exec.CommandContext(testkit.Ctx(t), bin, "delegate", "-json", "-config", fakeConfig(t), "wait for it")
	cmd.Env = append(os.Environ(), append(withData(t.TempDir()), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	lines := startLines(t, cmd)
	for {
		line := testkit.Recv(t, lines, "the agent's first text")
		if line == "" {
			t.Fatalf("the node ended before the agent's text; stderr %q", stderr.String())
		}
		if strings.Contains(line, `"kind":"text-delta"`) {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if len(rcv.metricsNamed("subactor.runs.started")) == 0 {
		t.Errorf("no metrics exported after Ctrl-C; stderr %q", stderr.String())
	}
	spans, _ := rcv.exported()
	for _, s := range spans {
		if spanAttr(s, "gen_ai.operation.name") == "invoke_agent" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT &&
			spanAttr(s, "subactor.stop_reason") == "aborted" {
			return
		}
	}
	for _, s := range spans {
		t.Logf("%s %s %v", s.Name, s.Kind, s.Attributes)
	}
	t.Fatalf("no aborted ACP run span among the %d exported after Ctrl-C; stderr %q", len(spans), stderr.String())
}

func spanInt(s *tracepb.Span, key string) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return 0
}

func pointAttr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// Contracts O2 and O4 through the node: with OTEL_EXPORTER_OTLP_ENDPOINT
// set, node run exports its metrics over OTLP before it exits, and they
// agree with its spans: gen_ai.client.operation.duration counts every
// chat span, gen_ai.client.token.usage sums their input and output
// tokens, and the runs started and ended are the child run spans, all
// completed, none live at the end. OTEL_METRICS_EXPORTER=none keeps
// metrics in (traces still go).
func TestO2_O4_NodeExportsMetricsOverOTLP(t *testing.T) {
	c := newOTLPReceiver(t)
	root := writeTree(t)
	_, stderr, code := nodeEnv(t, root, []string{envDataDir + "=" + t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT=" + c.URL}, "run", "-quiet")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "export") {
		t.Fatalf("the export complained:\n%s", stderr)
	}
	spans, _ := c.exported()
	var chats, children, input, output int64
	for _, s := range spans {
		switch spanAttr(s, "gen_ai.operation.name") {
		case "chat":
			chats++
			input += spanInt(s, "gen_ai.usage.input_tokens")
			output += spanInt(s, "gen_ai.usage.output_tokens")
		case "invoke_agent":
			if len(s.ParentSpanId) > 0 {
				children++
			}
		}
	}
	if chats == 0 || children == 0 || input == 0 || output == 0 {
		t.Fatalf("the run made %d chat spans (%d/%d tokens) and %d child runs: nothing to compare", chats, input, output, children)
	}
	// Cumulative: the last export of each metric has it all.
	last := func(name string) *metricpb.Metric {
		t.Helper()
		ms := c.metricsNamed(name)
		if len(ms) == 0 {
			t.Fatalf("no %s reached the receiver before the node exited", name)
		}
		return ms[len(ms)-1]
	}
	var calls uint64
	var seconds float64
	for _, p := range last("gen_ai.client.operation.duration").GetHistogram().GetDataPoints() {
		if pointAttr(p.Attributes, "gen_ai.operation.name") != "chat" || pointAttr(p.Attributes, "gen_ai.provider.name") == "" {
			t.Errorf("a duration point without its operation or provider: %v", p.Attributes)
		}
		calls += p.Count
		seconds += p.GetSum()
	}
	if calls != uint64(chats) || seconds <= 0 {
		t.Errorf("gen_ai.client.operation.duration: %d calls taking %gs, want the %d chat spans", calls, seconds, chats)
	}
	tokens := map[string]float64{}
	for _, p := range last("gen_ai.client.token.usage").GetHistogram().GetDataPoints() {
		tokens[pointAttr(p.Attributes, "gen_ai.token.type")] += p.GetSum()
	}
	if tokens["input"] != float64(input) || tokens["output"] != float64(output) {
		t.Errorf("gen_ai.client.token.usage %v, want the chat spans' input %d and output %d", tokens, input, output)
	}
	sum := func(name, reason string) (n int64) {
		for _, p := range last(name).GetSum().GetDataPoints() {
			if reason == "" || pointAttr(p.Attributes, "subactor.stop_reason") == reason {
				n += p.GetAsInt()
			}
		}
		return n
	}
	if started, ended, live := sum("subactor.runs.started", ""), sum("subactor.runs.ended", "completed"), sum("subactor.runs.live", ""); started != children || ended != children || live != 0 {
		t.Errorf("runs started %d, ended completed %d, live %d; want %d, %d, 0 (the child run spans)", started, ended, live, children, children)
	}

	off := newOTLPReceiver(t)
	_, stderr, code = nodeEnv(t, root, []string{envDataDir + "=" + t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT=" + off.URL, "OTEL_METRICS_EXPORTER=none"}, "run", "-quiet")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if spans, _ := off.exported(); len(spans) == 0 || len(off.metricsNamed("gen_ai.client.token.usage")) > 0 {
		t.Fatalf("with OTEL_METRICS_EXPORTER=none: %d spans and %d metric exports, want spans only", len(spans), len(off.metricsNamed("gen_ai.client.token.usage")))
	}
}
