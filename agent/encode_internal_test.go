package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/subagent"
)

// The loop writes its records by hand (encode.go); they must stay what
// json.Marshal writes. These are the fields it writes: a field added to
// one of the types must be added there too.
func TestEncodedTypesHaveTheFieldsTheEncoderWrites(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Message{}, `Role agent.Role json:"role"; Content []subagent.ContentBlock json:"content,omitempty"; ToolCalls []agent.ToolCall json:"toolCalls,omitempty"; ToolCallID string json:"toolCallId,omitempty"; IsError bool json:"isError,omitempty"`},
		{ToolCall{}, `ID string json:"id"; Name string json:"name"; Args json.RawMessage json:"args"`},
		{subagent.ContentBlock{}, `Type string json:"type"; Text string json:"text,omitempty"; Source string json:"source,omitempty"`},
		{Stop{}, `StopReason subagent.StopReason json:"stopReason"; Detail string json:"detail,omitempty"; Usage *subagent.Usage json:"usage,omitempty"; Output []subagent.ContentBlock json:"output,omitempty"`},
		{subagent.Usage{}, `InputTokens int json:"inputTokens"; OutputTokens int json:"outputTokens"; CachedInputTokens int json:"cachedInputTokens,omitempty"`},
	} {
		typ := reflect.TypeOf(c.v)
		var fields []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			fields = append(fields, f.Name+" "+f.Type.String()+" "+string(f.Tag))
		}
		if got := strings.Join(fields, "; "); got != c.want {
			t.Errorf("%s has fields\n%s\nthe encoder writes\n%s", typ, got, c.want)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[Message](), reflect.TypeFor[ToolCall](), reflect.TypeFor[subagent.ContentBlock](),
		reflect.TypeFor[Stop](), reflect.TypeFor[subagent.Usage](), reflect.TypeFor[Role](), reflect.TypeFor[subagent.StopReason]()} {
		if typ.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(typ).Implements(reflect.TypeFor[json.Marshaler]()) {
			t.Errorf("%s marshals itself: the encoder does not know how", typ)
		}
	}
}

// awkward draws strings JSON has to escape or repair: quotes, backslashes,
// control and HTML characters, U+2028 and U+2029, invalid UTF-8.
func awkward() *rapid.Generator[string] {
	pieces := []string{"", "a", "hi there", `"`, `\`, "\n", "\t", "\r", "\b", "\f", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"\u2028", "\u2029", "\u2027", "é", "日本", "😀", "\xff", "\xe2\x80", "\xed\xa0\x80", "\xf0\x9f", "/", "\\u0041"}
	return rapid.Custom(func(t *rapid.T) string {
		var b strings.Builder
		for range rapid.IntRange(0, 6).Draw(t, "n") {
			if rapid.Bool().Draw(t, "piece") {
				b.WriteString(rapid.SampledFrom(pieces).Draw(t, "p"))
			} else {
				b.WriteString(rapid.String().Draw(t, "s"))
			}
		}
		return b.String()
	})
}

// jsonValue draws a JSON document, spaced and escaped in awkward ways.
func jsonValue(depth int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		space := func() string { return rapid.SampledFrom([]string{"", "", " ", "\n\t ", "\r"}).Draw(t, "space") }
		kind := rapid.IntRange(0, 7).Draw(t, "kind")
		if depth <= 0 && kind >= 6 {
			kind = 0
		}
		switch kind {
		case 0:
			return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "lit")
		case 1:
			return rapid.SampledFrom([]string{"0", "-0", "12", "-3.25", "1e5", "1E-7", "6.02e+23", "123456789012345678901234567890", "0.5"}).Draw(t, "num")
		case 2, 3:
			b, _ := json.Marshal(awkward().Draw(t, "str"))
			return string(b)
		case 4:
			// Escapes json.Marshal never writes.
			return `"` + rapid.SampledFrom([]string{`\/`, `\u00e9`, `\uD83D\uDE00`, `\uD800`, `\uDC00x`, `\uD800\u0041`, `\u2028`, `a\"b`, `\\`, "\u2029", "<&>"}).Draw(t, "esc") + `"`
		case 5:
			return `"plain"`
		case 6:
			n := rapid.IntRange(0, 4).Draw(t, "len")
			var parts []string
			for range n {
				parts = append(parts, space()+jsonValue(depth-1).Draw(t, "elem")+space())
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			n := rapid.IntRange(0, 4).Draw(t, "len")
			var parts []string
			for range n {
				key, _ := json.Marshal(rapid.SampledFrom([]string{"a", "b", "path", "é", "<k>"}).Draw(t, "key"))
				parts = append(parts, space()+string(key)+space()+":"+space()+jsonValue(depth-1).Draw(t, "val")+space())
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	})
}

func drawMessage(t *rapid.T) Message {
	m := Message{
		Role:       Role(rapid.SampledFrom([]string{"user", "assistant", "tool", ""}).Draw(t, "role")),
		ToolCallID: rapid.SampledFrom([]string{"", "c1"}).Draw(t, "toolCallID"),
		IsError:    rapid.Bool().Draw(t, "isError"),
	}
	if rapid.Bool().Draw(t, "odd role") {
		m.Role = Role(awkward().Draw(t, "role"))
	}
	if rapid.Bool().Draw(t, "odd id") {
		m.ToolCallID = awkward().Draw(t, "toolCallID")
	}
	switch rapid.IntRange(0, 2).Draw(t, "content") {
	case 1:
		m.Content = []subagent.ContentBlock{}
	case 2:
		for range rapid.IntRange(1, 3).Draw(t, "blocks") {
			m.Content = append(m.Content, subagent.ContentBlock{Type: rapid.SampledFrom([]string{"text", "", "x<"}).Draw(t, "type"), Text: awkward().Draw(t, "text"), Source: rapid.SampledFrom([]string{"", "user", "agent:<x>"}).Draw(t, "source")})
		}
	}
	switch rapid.IntRange(0, 2).Draw(t, "calls") {
	case 1:
		m.ToolCalls = []ToolCall{}
	case 2:
		for range rapid.IntRange(1, 3).Draw(t, "n") {
			c := ToolCall{ID: awkward().Draw(t, "id"), Name: awkward().Draw(t, "name")}
			switch rapid.IntRange(0, 3).Draw(t, "args") {
			case 0:
				c.Args = nil
			case 1:
				c.Args = json.RawMessage(rapid.SampledFrom([]string{"", " ", "{", `{"a":`, "nul", `"\x01"`, "{} {}", "[1,]"}).Draw(t, "bad"))
			default:
				c.Args = json.RawMessage(jsonValue(3).Draw(t, "json"))
			}
			m.ToolCalls = append(m.ToolCalls, c)
		}
	}
	return m
}

func TestAppendMessageIsJSONMarshal(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, m Message) {
		want, wantErr := json.Marshal(m)
		got, err := appendRecord([]byte("prefix"), m)
		if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
		}
		if err == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("wrote\n%s\njson.Marshal writes\n%s", got[len("prefix"):], want)
		}
	}
	for _, args := range []string{"", " ", "null", "{}", ` { "a" : [ 1 , "x y" ] } `, "{\"a\":\"\t\"}", "[\"\u2028\u2029\u2027\"]",
		`"<a href='x'>&amp;</a>"`, `"\\\"<"`, "\"\xff\xe2\x80\"", `{"a":`, "{}{}", "\"\x01\""} {
		check(t, Message{Role: Assistant, ToolCalls: []ToolCall{{ID: "1", Name: "t", Args: json.RawMessage(args)}}})
	}
	rapid.Check(t, func(t *rapid.T) { check(t, drawMessage(t)) })
}

func TestAppendStopIsJSONMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := Stop{StopReason: subagent.StopReason(awkward().Draw(t, "reason")), Detail: awkward().Draw(t, "detail")}
		if rapid.Bool().Draw(t, "usage") {
			s.Usage = &subagent.Usage{
				InputTokens:       rapid.Int().Draw(t, "in"),
				OutputTokens:      rapid.Int().Draw(t, "out"),
				CachedInputTokens: rapid.SampledFrom([]int{0, 0, 1, -5, 1 << 40}).Draw(t, "cached"),
			}
		}
		for range rapid.IntRange(0, 2).Draw(t, "output") {
			s.Output = append(s.Output, subagent.ContentBlock{Type: "text", Text: awkward().Draw(t, "text")})
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendStop(nil, s); string(got) != string(want) {
			t.Fatalf("wrote\n%s\njson.Marshal writes\n%s", got, want)
		}
	})
}

// readArgs must read what the schema package's reader does, or decline.
func TestReadArgsReadsWhatTheSchemaPackageDoes(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, text string) (read bool) {
		got, ok := readArgs(text)
		want, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if !ok {
			return false
		}
		if err != nil {
			t.Fatalf("read %q, which the schema package refuses: %v", text, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %q as %#v, the schema package as %#v", text, got, want)
		}
		return true
	}
	rapid.Check(t, func(t *rapid.T) {
		doc := jsonValue(4).Draw(t, "doc")
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(doc)); err != nil {
			t.Fatalf("drew %q: %v", doc, err)
		}
		if !check(t, compact.String()) {
			t.Fatalf("declined compact JSON %q", compact.String())
		}
		check(t, doc) // spaced: may decline
	})
	rapid.Check(t, func(t *rapid.T) {
		check(t, rapid.String().Draw(t, "text"))
	})
	for _, text := range []string{
		``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `tru`, `nul`, `truex`,
		`"a`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", `"\'"`, `{"a":1}{}`, `{"a":1} `, `{"a":1,"a":2}`, `[[[[]]]]`, `{"a":{"b":[1,{"c":null}]}}`,
		`"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", "\"a\xe2\x80\xa8b\"", `1e-0`, `-0.0E+00`,
		strings.Repeat("[", maxArgsDepth+1) + strings.Repeat("]", maxArgsDepth+1),
		strings.Repeat("[", maxArgsDepth) + strings.Repeat("]", maxArgsDepth),
	} {
		check(t, text)
	}
}

// checkArgs answers exactly as the schema package's validation does.
func TestCheckArgsAgreesWithTheSchemaPackage(t *testing.T) {
	a := &Agent{}
	schemas := []string{
		`{"type":"object","properties":{"path":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}},"required":["path"],"additionalProperties":false}`,
		`{"type":"object","properties":{"x":{"type":"number","multipleOf":0.5},"o":{"type":"object","properties":{"k":{"enum":[null,true,"é"]}}}},"patternProperties":{"^<":{"type":"string","pattern":"^a"}}}`,
		`{"type":"array","prefixItems":[{"const":1},{"type":"string","format":"email"}]}`,
	}
	rapid.Check(t, func(t *rapid.T) {
		params := rapid.SampledFrom(schemas).Draw(t, "schema")
		var args bytes.Buffer
		if err := json.Compact(&args, []byte(rapid.OneOf(jsonValue(3), rapid.SampledFrom([]string{
			`{"path":"a"}`, `{"path":"far too long"}`, `{"path":"a","n":-1}`, `{"path":"a","n":1.0}`, `{"path":"a","tags":["x","x"]}`,
			`{"x":1.5,"o":{"k":"é"}}`, `{"x":1.25}`, `{"<a":"ab","<b":"b"}`, `[1,"a@b.c"]`, `[2]`, `{"path":"\u00e9\u00e9"}`,
		})).Draw(t, "args"))); err != nil {
			t.Fatal(err)
		}
		s, err := schema.Compile(json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		want := schema.ValidateArgs(s, args.String())
		got := a.checkArgs(ToolSpec{Parameters: json.RawMessage(params)}, args.Bytes())
		// The library lists some of a failure's parts in map order: the
		// same message, in any order.
		if (got == nil) != (want == nil) || got != nil && sorted(got.Error()) != sorted(want.Error()) {
			t.Fatalf("args %s: checkArgs says %v, the schema package %v", args.String(), got, want)
		}
	})
}

func sorted(s string) string {
	b := []byte(s)
	slices.Sort(b)
	return string(b)
}

func FuzzReadArgs(f *testing.F) {
	for _, s := range []string{`{"a":[1,"b",{"c":null}]}`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, "\"\xff\"", `[1e5,-0]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := readArgs(text)
		if !ok {
			return
		}
		want, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read %q as %#v; the schema package: %#v, %v", text, got, want, err)
		}
	})
}
