package acp

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract K3: the fold keeps at most maxKept bytes of each string of an
// open tool call, in strings of their own: 150 calls left open with 2 MB
// titles and 4 KB ids grow the live heap by less than 1 MiB (by 300 MB
// before the bound, a substring keeping each title alive).
func TestK3_OpenToolCallsOf2MBTitlesKeepLittle(t *testing.T) {
	ts := newTurnState("run", 1<<10)
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	title, long := strings.Repeat("T", 2<<20), strings.Repeat("i", 4096)
	base := live()
	for i := range 150 {
		// What decoding a line gives: strings of their own each time.
		id := sdk.ToolCallId(strconv.Itoa(i) + long)
		u := sdk.StartToolCall(id, strings.Clone(title), sdk.WithStartKind(sdk.ToolKind(strings.Clone(long))))
		u.ToolCall.SessionUpdate = "tool_call"
		ts.apply(u)
	}
	grown := int64(live()) - int64(base)
	if len(ts.calls) != 150 || grown > 1<<20 {
		t.Fatalf("%d calls kept in %+d bytes", len(ts.calls), grown)
	}
	runtime.KeepAlive(ts)
}

// lineChan is a writer that hands each line written to a channel (the
// outbox calls it under its lock).
type lineChan struct {
	c    chan string
	part []byte
}

func (l *lineChan) Write(b []byte) (int, error) {
	l.part = append(l.part, b...)
	if n := len(l.part); n > 0 && l.part[n-1] == '\n' {
		l.c <- string(l.part)
		l.part = nil
	}
	return len(b), nil
}

// sinkFunc is an EventSink.
type sinkFunc func(subagent.RunProgress)

func (f sinkFunc) Emit(ev subagent.RunProgress) { f(ev) }

// Contract K3: the server admits MaxRequests requests at once; one more,
// or one whose id is in flight already, is answered at once with an error
// the agent may retry on, and the parent is told once; $/cancel_request
// ends the request it names, answered "cancelled".
func TestK3_ServerBoundsRequestsInFlight(t *testing.T) {
	asked := make(chan struct{}, MaxRequests)
	policy := func(ctx context.Context, _ ToolCall) bool {
		asked <- struct{}{}
		<-ctx.Done() // a person who never answers
		return true
	}
	events := make(chan subagent.RunProgress, 16)
	cl, err := newClient(Config{Permissions: policy}, t.TempDir(), "run", sinkFunc(func(ev subagent.RunProgress) {
		if ev.Kind == acpdata.LimitReached {
			events <- ev
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	cl.listen("s", false)
	answers := make(chan string, MaxRequests+8)
	srv := newServer(cl, &lineChan{c: answers}, time.Minute, slog.New(slog.DiscardHandler))
	ask := func(id string) {
		params := `{"sessionId":"s","toolCall":{"toolCallId":"t","title":"T","kind":"edit"},"options":[{"kind":"allow_once","name":"ok","optionId":"a"}]}`
		srv.request(json.RawMessage(id), sdk.ClientMethodSessionRequestPermission, json.RawMessage(params), 200)
	}
	for i := range MaxRequests {
		ask(strconv.Itoa(i))
	}
	for range MaxRequests {
		testkit.Recv(t, asked, "the policy to be asked")
	}
	for _, c := range []struct{ id, why string }{
		{"99", "requests of the agent were in flight already"},
		{"7", "a request with this id is in flight already"},
	} {
		ask(c.id)
		got := testkit.Recv(t, answers, "the refusal")
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`+c.id+`,"error":{"code":-32603`) || !strings.Contains(got, c.why) || !strings.Contains(got, "retry") {
			t.Fatalf("answer to %s: %s", c.id, got)
		}
	}
	if ev := testkit.Recv(t, events, "the limit event"); ev.Kind != acpdata.LimitReached || !ev.IsError {
		t.Fatalf("event %+v", ev)
	}
	srv.cancelRequest(json.RawMessage(`{"requestId":3}`))
	if got := testkit.Recv(t, answers, "the cancelled request's answer"); got != `{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`+"\n" {
		t.Fatalf("answer to the cancelled request: %s", got)
	}
	cl.close()
	srv.close()
	if len(answers) != MaxRequests-1 {
		t.Fatalf("%d answers after close, want %d", len(answers), MaxRequests-1)
	}
	if len(events) != 0 {
		t.Fatalf("%d more limit events", len(events))
	}
}
