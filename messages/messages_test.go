package messages_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResultRoundTripsThroughTheWire(t *testing.T) {
	in := subagent.Result{
		Output:     []subagent.ContentBlock{subagent.Text("a"), subagent.Text("b")},
		Structured: json.RawMessage(`{"files":3}`),
		StopReason: subagent.MaxTokens,
		Detail:     "cut",
		Usage:      &subagent.Usage{InputTokens: 7, OutputTokens: 9},
	}
	wire, err := proto.Marshal(messages.FromResult(in))
	if err != nil {
		t.Fatal(err)
	}
	var back messages.Result
	if err := proto.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	if out := messages.ToResult(&back); !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

func TestToEventConvertsEveryEventAndRejectsTheRest(t *testing.T) {
	for wire, want := range map[proto.Message]subagent.Event{
		&messages.ProviderAdded{Provider: "p"}:                   subagent.ProviderAdded{Provider: "p"},
		&messages.ProviderRemoved{Name: "p"}:                     subagent.ProviderRemoved{Name: "p"},
		&messages.RunStarted{RunId: "r", Provider: "p", Id: "c"}: subagent.RunStarted{RunID: "r", Provider: "p", ID: "c"},
		&messages.RunEnded{RunId: "r", Local: true, StopReason: "aborted", LastAssistantMessage: "bye"}: subagent.RunEnded{
			RunID: "r", Local: true, StopReason: subagent.Aborted, LastAssistantMessage: "bye"},
	} {
		got, err := messages.ToEvent(wire)
		if err != nil || got != want {
			t.Errorf("ToEvent(%v) = %#v, %v", wire, got, err)
		}
	}
	if _, err := messages.ToEvent(&messages.Cancel{}); err == nil {
		t.Error("a non-event converted to an event")
	}
}

// FuzzResultDecode feeds arbitrary bytes to the wire decoder: hostile input
// from a peer must fail cleanly or convert, never panic (K3).
func FuzzResultDecode(f *testing.F) {
	seed, _ := proto.Marshal(messages.FromResult(subagent.Result{Output: []subagent.ContentBlock{subagent.Text("x")}, StopReason: subagent.Completed}))
	f.Add(seed)
	f.Add([]byte{0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r messages.Result
		if proto.Unmarshal(b, &r) == nil {
			_ = messages.ToResult(&r)
		}
	})
}
