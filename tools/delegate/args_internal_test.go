package delegate

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/subactor/subactor/subagent"
)

var fullCaps = &registered{caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, continuable: true}

// parseTool is a Tool that parse can run on: no provider, no tasks.
func parseTool() *Tool { return &Tool{cfg: Config{Provider: "p", Limits: Limits{}.withDefaults()}} }

func ptr[T any](v T) *T { return &v }

// parse answers as it did with a json.Decoder alone: the edges below were
// recorded from that code.
func TestParseEdgesAsBefore(t *testing.T) {
	base := args{Description: "d", Prompt: "p"}
	with := func(f func(*args)) args { a := base; f(&a); return a }
	for _, c := range []struct {
		raw  string
		want args
		err  string // "" for none
	}{
		{`{"description":"d","prompt":"p"}`, base, ""},
		{" {\"description\" : \"d\",\t\"prompt\":\"p\"}\r\n", base, ""},
		{`{"description":"d","prompt":"p","extra":1}`, base, `delegate: invalid arguments: json: unknown field "extra"`},
		{`{"description":"d","prompt":"p"}}`, base, "delegate: invalid arguments: trailing data after the arguments object"},
		{`{"description":"d","prompt":"p"}]`, base, "delegate: invalid arguments: trailing data after the arguments object"},
		{`{"description":"d","prompt":"p"} {}`, base, "delegate: invalid arguments: trailing data after the arguments object"},
		{`{"description":"d","prompt":"p"}x`, base, "delegate: invalid arguments: trailing data after the arguments object"},
		// A repeated key's last value wins.
		{`{"description":"a","description":"d","prompt":"p"}`, base, ""},
		{`{"description":"d","prompt":"p","delegation_levels":1,"delegation_levels":2}`, with(func(a *args) { a.Levels = ptr(2) }), ""},
		{`{"description":"d","prompt":"p","persona":"x","persona":null}`, base, ""},
		// ... but a repeated object merges.
		{`{"description":"d","prompt":"p","tools":{"allow":["a"]},"tools":{"deny":["b"]}}`,
			with(func(a *args) { a.Tools = &subagent.ToolFilter{Allow: []string{"a"}, Deny: []string{"b"}} }), ""},
		// Keys match the parameters whatever their case.
		{`{"Description":"d","PROMPT":"p"}`, base, ""},
		{`{"description":null,"prompt":"p"}`, with(func(a *args) { a.Description = "" }), "delegate: invalid arguments: description is required"},
		// A null output_schema is one given.
		{`{"description":"d","prompt":"p","output_schema":null}`, with(func(a *args) { a.OutputSchema = json.RawMessage("null") }), ""},
		{`{"description":"d","prompt":"p","delegation_levels":1.0}`, with(func(a *args) { a.Levels = ptr(0) }),
			"delegate: invalid arguments: json: cannot unmarshal number 1.0 into Go struct field args.delegation_levels of type int"},
		{`{"description":"d","prompt":"p","delegation_levels":1e1}`, with(func(a *args) { a.Levels = ptr(0) }),
			"delegate: invalid arguments: json: cannot unmarshal number 1e1 into Go struct field args.delegation_levels of type int"},
		{`{"description":"d","prompt":"p","delegation_levels":99999999999999999999}`, with(func(a *args) { a.Levels = ptr(0) }),
			"delegate: invalid arguments: json: cannot unmarshal number 99999999999999999999 into Go struct field args.delegation_levels of type int"},
		{`{"description":"d","prompt":"p","delegation_levels":-0}`, with(func(a *args) { a.Levels = ptr(0) }), ""},
		{`{"description":"d","prompt":"p","delegation_levels":-1}`, with(func(a *args) { a.Levels = ptr(-1) }), "delegate: invalid arguments: delegation_levels must not be negative"},
		{`{"description":"d","prompt":"p","run_in_background":true}`, with(func(a *args) { a.Background = true }),
			`delegate: invalid arguments: provider "p" does not support run_in_background`},
		{`{"description":"d\u0041","prompt":"p\n"}`, args{Description: "dA", Prompt: "p\n"}, ""},
		{"{\"description\":\"d\xff\",\"prompt\":\"p\"}", args{Description: "d\uFFFD", Prompt: "p"}, ""},
		{`{"description":"d","prompt":"p"`, args{}, "delegate: invalid arguments: unexpected EOF"},
		{``, args{}, "delegate: invalid arguments: EOF"},
		{`{}`, args{}, "delegate: invalid arguments: description is required"},
	} {
		a, err := parseTool().parse(json.RawMessage(c.raw), fullCaps)
		if got := errText(err); got != c.err || !reflect.DeepEqual(a, c.want) {
			t.Errorf("parse(%s) = %+v, %s; want %+v, %s", c.raw, a, got, c.want, c.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// quickArgs reads the common arguments itself.
func TestQuickArgsTakesTheCommonArguments(t *testing.T) {
	for _, raw := range []string{
		`{}`,
		`{"description":"echo","prompt":"echo hi"}`,
		`{"prompt":"é😀","description":"d","persona":"","delegation_levels":0,"run_in_background":false,"continuable":true}`,
		` { "description" : "d" , "prompt" : "p" , "delegation_levels" : -12 } ` + "\n",
	} {
		if _, ok := quickArgs([]byte(raw)); !ok {
			t.Errorf("quickArgs(%s) declined", raw)
		}
	}
}

// Whatever quickArgs reads, decodeArgs reads the same.
func TestQuickArgsReadsWhatTheDecoderDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	quick := 0
	for range 20000 {
		if checkQuickArgs(t, randomArgs(rng)) {
			quick++
		}
	}
	if quick < 2000 {
		t.Fatalf("quickArgs read only %d of the documents", quick)
	}
}

func FuzzQuickArgs(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		f.Add(randomArgs(rng))
	}
	f.Fuzz(func(t *testing.T, raw string) { checkQuickArgs(t, raw) })
}

func checkQuickArgs(t testing.TB, raw string) (read bool) {
	t.Helper()
	got, ok := quickArgs([]byte(raw))
	if !ok {
		return false
	}
	want, err := decodeArgs(json.RawMessage(raw))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("quickArgs(%q) = %+v; decodeArgs: %+v, %v", raw, got, want, err)
	}
	return true
}

// randomArgs draws argument objects, from keys and values near what
// quickArgs takes: the first good ones of each list are well formed, and a
// document draws from the others never, now and then, or often.
func randomArgs(rng *rand.Rand) string {
	wild := []int{0, 12, 2}[rng.IntN(3)] // one in wild choices is from any of the list
	pick := func(good int, list ...string) string {
		if wild != 0 && rng.IntN(wild) == 0 {
			return list[rng.IntN(len(list))]
		}
		return list[rng.IntN(good)]
	}
	space := func() string {
		if rng.IntN(4) == 0 {
			return pick(4, " ", "\n", "\t ", "\r\n", "\v", "\u00a0")
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(space() + pick(1, "{", "[", `"`, "") + space())
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteString(pick(1, ",", ",,", "", ";") + space())
		}
		b.WriteString(pick(6, `"description"`, `"prompt"`, `"persona"`, `"delegation_levels"`, `"run_in_background"`, `"continuable"`,
			`"output_schema"`, `"tools"`, `"Prompt"`, `"desc\u0072iption"`, `"extra"`, `""`, `prompt`, `"prompt`))
		b.WriteString(space() + pick(1, ":", "", "=") + space())
		b.WriteString(pick(12, `"d"`, `"echo hi"`, `""`, `" "`, `"é😀"`, `0`, `-0`, `7`, `-12`, `9223372036854775807`, `true`, `false`,
			"\"\xff\"", "\"a\tb\"", `"a\nb"`, `"\u0041"`, `"a\"b"`, `"unterminated`, `01`, `1.0`, `1e1`, `-`,
			`9223372036854775808`, `-9223372036854775809`, `truex`, `tru`, `null`, `nul`, `{}`, `{"type":"object"}`, `{"allow":["a"]}`, `[]`, `["x"]`))
		b.WriteString(space())
	}
	b.WriteString(pick(1, "}", "}}", "]", "", "} {}", "}x") + space())
	return b.String()
}

// The common arguments cost one copy of the text.
func TestParseCommonArgumentsAllocatesOnce(t *testing.T) {
	tool, raw := parseTool(), json.RawMessage(`{"description":"echo","prompt":"echo hi"}`)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := tool.parse(raw, fullCaps); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("parse: %v allocations, want 1", n)
	}
}

func BenchmarkParse(b *testing.B) {
	tool := parseTool()
	for name, raw := range map[string]json.RawMessage{
		"common": json.RawMessage(`{"description":"echo","prompt":"echo hi"}`),
		"tools":  json.RawMessage(`{"description":"echo","prompt":"echo hi","tools":{"allow":["a"]}}`),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tool.parse(raw, fullCaps); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decoder", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeArgs(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The foreground answer is what json.Marshal writes of it, whatever its
// fields hold.
func TestAnswerTextIsJSONMarshals(t *testing.T) {
	texts := []string{"", "hi", `a "quoted" <b> & \ line` + "\n", "\u2028 é \xff \x00", "日本"}
	structured := []json.RawMessage{nil, json.RawMessage(`{ "a" : [1, "<x>"] }`), json.RawMessage(`"s"`)}
	for _, out := range texts {
		for _, id := range texts {
			for _, st := range structured {
				a := Answer{Kind: "foreground", RunID: id, SessionID: "s-" + id, Output: out, Structured: st}
				want, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := a.text(); err != nil || got != string(want) {
					t.Fatalf("text() = %s, %v; json.Marshal %s", got, err, want)
				}
			}
		}
	}
	if _, err := (Answer{Structured: json.RawMessage(`{`)}).text(); err == nil {
		t.Fatal("an answer whose structured output is not JSON was written")
	}
}
