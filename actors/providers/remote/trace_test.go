package remote_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/subactor/subactor/internal/testkit"
)

// Contract O3 across nodes: the remote start message carries the run's
// trace context, and the hosting node's side of the run is a SERVER span
// under the caller's CLIENT run span, in the caller's trace, ended with
// the run.
func TestO3_RemoteRunContinuesTheCallersTrace(t *testing.T) {
	exp := testkit.Tracing(t)
	svc, _ := service(t, "echo", 2)
	r := start(t, svc, testkit.Ctx(t), "hello")
	if _, err := r.Wait(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	var client, server *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.SpanKind {
		case trace.SpanKindClient:
			client = &s
		case trace.SpanKindServer:
			server = &s
		}
	}
	if client == nil || server == nil {
		t.Fatalf("spans %v: want the caller's CLIENT run span and the host's SERVER one", exp.GetSpans().Snapshots())
	}
	if server.SpanContext.TraceID() != client.SpanContext.TraceID() || server.Parent.SpanID() != client.SpanContext.SpanID() || !server.Parent.IsRemote() {
		t.Fatalf("host's span %v under %v, want under the caller's %v", server.SpanContext, server.Parent, client.SpanContext)
	}
}
