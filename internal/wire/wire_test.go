package wire_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/internal/wire"
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
	encoded, err := proto.Marshal(wire.FromResult(in))
	if err != nil {
		t.Fatal(err)
	}
	var back messages.Result
	if err := proto.Unmarshal(encoded, &back); err != nil {
		t.Fatal(err)
	}
	if out := wire.ToResult(&back); !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

// TestEveryEventTypeCrossesTheWire: each event type of package subagent
// (each type with an eventType method in subagent/events.go) converts to its wire form and back unchanged, so a new event type
// cannot be dropped silently by a conversion switch that lacks it.
func TestEveryEventTypeCrossesTheWire(t *testing.T) {
	usage := &subagent.Usage{InputTokens: 3, OutputTokens: 4, CachedInputTokens: 2}
	samples := []subagent.Event{
		subagent.ProviderAdded{Provider: "p"},
		subagent.ProviderRemoved{Name: "p"},
		subagent.RunStarted{RunID: "r", Provider: "p", SessionID: "s", Local: true},
		subagent.RunEnded{RunID: "r", Provider: "p", SessionID: "s", Local: true, StopReason: subagent.Aborted, LastAssistantMessage: "bye", Usage: usage,
			Result: subagent.Result{Output: []subagent.ContentBlock{subagent.Text("bye")}, Structured: json.RawMessage(`{"k":1}`), StopReason: subagent.Aborted, Detail: "why", Usage: usage}},
		subagent.RunProgress{RunID: "r", Kind: subagent.ToolCallFinished, Step: 2, Text: "count", IsError: true, Usage: usage},
		subagent.ListenerOverflow{Bound: 9},
		subagent.ListenerFailed{Reason: "crash"},
	}
	covered := map[string]bool{}
	for _, ev := range samples {
		pb, err := wire.FromEvent(ev)
		if err != nil {
			t.Fatalf("FromEvent(%T): %v", ev, err)
		}
		b, err := proto.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		decoded := pb.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, decoded); err != nil {
			t.Fatal(err)
		}
		back, err := wire.ToEvent(decoded)
		if err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("round trip of %#v: %#v, %v", ev, back, err)
		}
		covered[reflect.TypeOf(ev).Name()] = true
	}
	for _, typ := range eventTypes(t) {
		if !covered[typ] {
			t.Errorf("event type %s has no wire round trip in this test", typ)
		}
	}
	if _, err := wire.ToEvent(&messages.Cancel{}); err == nil {
		t.Error("a non-event converted to an event")
	}
}

// eventTypes names the types of package subagent that have an eventType method:
// its events.
func eventTypes(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "../../subagent/events.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name == "eventType" {
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no event type found in subagent/events.go")
	}
	return names
}

// FuzzResultDecode feeds arbitrary bytes to the wire decoder: hostile input
// from a peer must fail cleanly or convert, never panic (K3).
func FuzzResultDecode(f *testing.F) {
	seed, _ := proto.Marshal(wire.FromResult(subagent.Result{Output: []subagent.ContentBlock{subagent.Text("x")}, StopReason: subagent.Completed}))
	f.Add(seed)
	f.Add([]byte{0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r messages.Result
		if proto.Unmarshal(b, &r) == nil {
			_ = wire.ToResult(&r)
		}
	})
}
