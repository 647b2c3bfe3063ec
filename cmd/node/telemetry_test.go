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

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/internal/testkit"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: what the node
// exported, span by span, with its resource's service.name.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	c := &otlpReceiver{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
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
	if limit := off + off/10 + 15*time.Millisecond; on > limit {
		t.Fatalf("a run took %s with an unreachable collector, %s without (limit %s)", on, off, limit)
	}
	t.Logf("best of 5: %s off, %s with an unreachable collector", off, on)
}

// Contract O1 on the way out: Ctrl-C mid-run still exports the run's
// spans before the node exits (130): the ACP child's run span, a CLIENT
// span, ended aborted.
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
