package delegate

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/subagent"
)

var fullCaps = &registered{caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, continuable: true}

// parseTool is a Tool that parse can run on: no provider, no tasks.
func parseTool() *Tool { return &Tool{cfg: Config{Provider: "p", Limits: Limits{}.withDefaults()}} }

func ptr[T any](v T) *T { return &v }

// Contract T1 (and K3): the delegate tool reads its arguments strictly. A
// key given twice, a key in another case than the parameter's, an unknown
// key, a null, a wrong type and anything after the object are typed
// errors (ErrArgs wrapping a *jsonv2.Error that says what and where),
// never a silently chosen value.
func TestT1_ArgumentsAreStrict(t *testing.T) {
	for _, c := range []struct {
		raw     string
		problem jsonv2.Problem
	}{
		{`{"description":"a","description":"d","prompt":"p"}`, jsonv2.Repeated},
		{`{"description":"d","prompt":"p","tools":{"allow":["a"]},"tools":{"deny":["b"]}}`, jsonv2.Repeated},
		{`{"Description":"d","prompt":"p"}`, jsonv2.Unknown},
		{`{"description":"d","PROMPT":"p"}`, jsonv2.Unknown},
		{`{"description":"d","prompt":"p","extra":1}`, jsonv2.Unknown},
		{`{"description":"d","prompt":"p","tools":{"allow":["a"],"Deny":["b"]}}`, jsonv2.Unknown},
		{`{"description":null,"prompt":"p"}`, jsonv2.Null},
		{`{"description":"d","prompt":"p","delegation_levels":1.0}`, jsonv2.Type},
		{`{"description":"d","prompt":"p","delegation_levels":99999999999999999999}`, jsonv2.Type},
		{`{"description":"d","prompt":"p","run_in_background":"yes"}`, jsonv2.Type},
		{`{"description":"d","prompt":"p"}}`, jsonv2.Syntax},
		{`{"description":"d","prompt":"p"} {}`, jsonv2.Syntax},
		{"{\"description\":\"d\xff\",\"prompt\":\"p\"}", jsonv2.Syntax},
		{`{"description":"d","prompt":"p"`, jsonv2.Syntax},
		{``, jsonv2.Syntax},
	} {
		_, err := parseTool().parse(json.RawMessage(c.raw), fullCaps)
		var jerr *jsonv2.Error
		if !errors.Is(err, ErrArgs) || !errors.As(err, &jerr) || jerr.Problem != c.problem {
			t.Errorf("parse(%s) = %v; want ErrArgs with problem %d", c.raw, err, c.problem)
		}
	}
}

// Contract T1: what the model sends as the schema says is read as it is.
func TestT1_ArgumentsAsTheSchemaSays(t *testing.T) {
	base := args{Description: "d", Prompt: "p"}
	with := func(f func(*args)) args { a := base; f(&a); return a }
	for _, c := range []struct {
		raw  string
		want args
		err  string // "" for none
	}{
		{`{"description":"d","prompt":"p"}`, base, ""},
		{" {\"description\" : \"d\",\t\"prompt\":\"p\"}\r\n", base, ""},
		{`{"description":"d\u0041","prompt":"p\n"}`, args{Description: "dA", Prompt: "p\n"}, ""},
		{`{"description":"d","prompt":"p","delegation_levels":-0}`, with(func(a *args) { a.Levels = ptr(0) }), ""},
		{`{"description":"d","prompt":"p","persona":"x","tools":{"allow":["a"]}}`,
			with(func(a *args) { a.Persona = ptr("x"); a.Tools = &subagent.ToolFilter{Allow: []string{"a"}} }), ""},
		{`{"description":"d","prompt":"p","output_schema":{"type":"object"}}`,
			with(func(a *args) { a.OutputSchema = json.RawMessage(`{"type":"object"}`) }), ""},
		{`{"description":"d","prompt":"p","delegation_levels":-1}`, args{}, "delegate: invalid arguments: delegation_levels must not be negative"},
		{`{"description":"d","prompt":"p","run_in_background":true}`, args{}, `delegate: invalid arguments: provider "p" does not support run_in_background`},
		{`{}`, args{}, "delegate: invalid arguments: description is required"},
	} {
		a, err := parseTool().parse(json.RawMessage(c.raw), fullCaps)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("parse(%s) = %v; want %s", c.raw, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(a, c.want) {
			t.Errorf("parse(%s) = %+v, %v; want %+v", c.raw, a, err, c.want)
		}
	}
}

// The foreground answer is JSON that reads back as the answer, its text
// that is not UTF-8 replaced rather than refused.
func TestAnswerText(t *testing.T) {
	a := Answer{Kind: "foreground", RunID: "r", SessionID: "s", Output: "a \"q\" <b> & \\ \n \u2028 \xff", Structured: json.RawMessage(`{ "a" : [1, "<x>"] }`)}
	text, err := a.text()
	if err != nil {
		t.Fatal(err)
	}
	var got Answer
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	a.Output, a.Structured = "a \"q\" <b> & \\ \n \u2028 \uFFFD", json.RawMessage(`{"a":[1,"<x>"]}`)
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("text() = %s, reads back as %+v", text, got)
	}
	if _, err := (Answer{Structured: json.RawMessage(`{`)}).text(); err == nil {
		t.Fatal("an answer whose structured output is not JSON was written")
	}
}
