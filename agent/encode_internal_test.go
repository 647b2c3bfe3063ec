package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/subactor/subactor/subagent"
)

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

// A record reads back as what json.Marshal writes of its message reads
// back as: the same message, its text that is not UTF-8 repaired.
func TestAppendRecordReadsBackAsJSONMarshal(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, m Message) {
		want, wantErr := json.Marshal(m)
		got, err := appendRecord([]byte("prefix"), &m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
		}
		if err != nil {
			return
		}
		var gotMsg, wantMsg Message
		if err := json.Unmarshal(got[len("prefix"):], &gotMsg); err != nil || string(got[:len("prefix")]) != "prefix" {
			t.Fatalf("wrote %s: %v", got, err)
		}
		if err := json.Unmarshal(want, &wantMsg); err != nil {
			t.Fatalf("%v", err)
		}
		for i := range wantMsg.ToolCalls { // compacted by both, escaped differently
			var g, w any
			_ = json.Unmarshal(gotMsg.ToolCalls[i].Args, &g)
			_ = json.Unmarshal(wantMsg.ToolCalls[i].Args, &w)
			if !reflect.DeepEqual(g, w) || bytes.ContainsAny(gotMsg.ToolCalls[i].Args, " \n\t") && !bytes.ContainsAny(wantMsg.ToolCalls[i].Args, " \n\t") {
				t.Fatalf("args %s, json.Marshal's %s", gotMsg.ToolCalls[i].Args, wantMsg.ToolCalls[i].Args)
			}
			gotMsg.ToolCalls[i].Args, wantMsg.ToolCalls[i].Args = nil, nil
		}
		if !reflect.DeepEqual(gotMsg, wantMsg) {
			t.Fatalf("wrote\n%s\njson.Marshal writes\n%s", got[len("prefix"):], want)
		}
	}
	for _, args := range []string{"", " ", "null", "{}", ` { "a" : [ 1 , "x y" ] } `, "{\"a\":\"\t\"}", "[\"\u2028\u2029\u2027\"]",
		`"<a href='x'>&amp;</a>"`, `"\\\"<"`, "\"\xff\xe2\x80\"", `{"a":`, "{}{}", "\"\x01\""} {
		check(t, Message{Role: Assistant, ToolCalls: []ToolCall{{ID: "1", Name: "t", Args: json.RawMessage(args)}}})
	}
	rapid.Check(t, func(t *rapid.T) { check(t, drawMessage(t)) })
}
