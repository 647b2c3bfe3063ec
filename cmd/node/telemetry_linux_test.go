package main

import (
	"encoding/hex"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/testkit"
)

// Contract O3 at the node's ACP face: an editor that traces puts its
// span in the prompt's _meta.traceparent, and the turn's whole tree is
// exported in the editor's trace, the top agent's run span under the
// editor's span.
func TestO3_NodeACPJoinsTheEditorsTrace(t *testing.T) {
	rcv := newOTLPReceiver(t)
	dir, data := facesTree(t), t.TempDir()
	c := startACP(t, data, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL})
	ctx := testkit.Ctx(t)
	s, err := c.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	res, err := c.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: prompt("survey ."),
		Meta: map[string]any{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
	if err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("session/prompt: %v, %+v", err, res)
	}
	_ = c.stdin.Close() // the node exits, flushing its spans
	c.waitExit(t, "node acp to exit once its input closed")
	spans, _ := rcv.exported()
	if len(spans) == 0 {
		t.Fatal("no span exported")
	}
	tops := 0
	for _, sp := range spans {
		if got := hex.EncodeToString(sp.TraceId); got != traceID {
			t.Fatalf("span %q in trace %s, not the editor's %s", sp.Name, got, traceID)
		}
		if hex.EncodeToString(sp.ParentSpanId) == spanID {
			tops++
			if spanAttr(sp, "gen_ai.operation.name") != "invoke_agent" {
				t.Errorf("%q is under the editor's span, not the top agent's run", sp.Name)
			}
		}
	}
	if tops != 1 {
		t.Fatalf("%d spans under the editor's span, want the top agent's run alone", tops)
	}
}
