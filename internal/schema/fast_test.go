package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
)

// supported are schemas inside the Fast subset, the delegate tool's among
// them (see delegateSchemas).
var supported = []string{
	`true`,
	`false`,
	`{}`,
	`{"type":"object"}`,
	`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":-1.5,"maximum":1e2}},"additionalProperties":false}`,
	`{"type":"object","properties":{"n":{"type":["integer","null"],"exclusiveMinimum":0,"exclusiveMaximum":10.25}}}`,
	`{"type":"object","properties":{"n":{"minimum":0.001,"maximum":12345678901234567890123}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":-9007199254740993,"maximum":0}}}`,
	`{"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":4}},"required":["s"],"additionalProperties":false}`,
	`{"type":"object","properties":{"s":{"type":"string","enum":["a","b","é","😀😀"]}}}`,
	`{"type":"object","properties":{"s":{"enum":[]}}}`,
	`{"type":"object","properties":{"e":{"enum":["\ufffd","a\ufffd","a/b","\"\\\b","😀"]},"s":{"type":"string","maxLength":1}}}`,
	`{"type":"object","properties":{"s":{"enum":["x"],"maxLength":0}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","maxLength":2},"minItems":1,"maxItems":3}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer","minimum":0}}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":false}}}`,
	`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"],"additionalProperties":false}}}`,
	`{"type":"object","properties":{"o":{"type":"object","additionalProperties":{"type":"string"}}},"additionalProperties":{"type":["number","boolean"]}}`,
	`{"type":"object","properties":{"t":true,"f":false},"additionalProperties":true}`,
	`{"type":["object","array","string","number","integer","boolean","null"]}`,
	`{"type":"object","required":["a","b"],"properties":{"a":{"type":"null"}}}`,
	`{"type":"object","title":"t","description":"d","$comment":"c","default":{},"examples":[{}],"properties":{"d":{"deprecated":true,"readOnly":false,"writeOnly":false,"type":"string"}}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"type":"integer","maximum":3}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"number","exclusiveMinimum":0}}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":1e-3,"maximum":1E+3}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":-0,"maximum":0.0}}}`,
	`{"properties":{"n":{"maximum":-12.5e-3}},"minLength":1,"maxItems":0}`,
}

// unsupported are schemas that compile but leave the subset.
var unsupported = []string{
	`{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}`,
	`{"type":"object","properties":{"s":{"type":"string","format":"email"}}}`,
	`{"type":"object","properties":{"s":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,
	`{"type":"object","$defs":{"s":{"type":"string"}}}`,
	`{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`,
	`{"type":"object","anyOf":[{"required":["a"]}]}`,
	`{"type":"object","allOf":[{"required":["a"]}]}`,
	`{"type":"object","not":{"required":["a"]}}`,
	`{"type":"object","if":{"required":["a"]},"then":{"required":["b"]}}`,
	`{"type":"object","properties":{"n":{"const":1}}}`,
	`{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`,
	`{"type":"object","properties":{"n":{"enum":["a",1]}}}`,
	`{"type":"object","properties":{"n":{"enum":[null]}}}`,
	`{"type":"object","minProperties":1}`,
	`{"type":"object","patternProperties":{"^x":{}}}`,
	`{"type":"object","propertyNames":{"maxLength":3}}`,
	`{"type":"object","dependentRequired":{"a":["b"]}}`,
	`{"type":"object","unevaluatedProperties":false}`,
	`{"type":"array","prefixItems":[{"type":"string"}]}`,
	`{"type":"array","contains":{"type":"string"}}`,
	`{"type":"array","uniqueItems":true}`,
	`{"type":"object","properties":{"s":{"type":"string","maxLength":2.0}}}`,
	`{"type":"object","properties":{"s":{"type":"string","maxLength":1e1}}}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":1e1000001}}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"}]}`,
	`{"type":"object","properties":{"o":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`,
	`{"$id":"https://example.com/s","type":"object"}`,
	`{"type":"object","x-vendor":1}`,
	`{"type":"object","nullable":true}`,
	`{"type":"string","contentEncoding":"base64"}`,
}

func TestCompileFastKnowsItsSubset(t *testing.T) {
	for _, raw := range append(supported, delegateSchemas(t)...) {
		if _, fast, err := schema.CompileFast(json.RawMessage(raw)); err != nil || fast == nil {
			t.Errorf("CompileFast(%s) = %v, %v; want a Fast", raw, fast, err)
		}
	}
	for _, raw := range unsupported {
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || s == nil || fast != nil {
			t.Errorf("CompileFast(%s) = %v, %v, %v; want no Fast", raw, s, fast, err)
		}
	}
	if s, fast, err := schema.CompileFast(json.RawMessage(`{"type":7}`)); err == nil || s != nil || fast != nil {
		t.Errorf("CompileFast(bad) = %v, %v, %v", s, fast, err)
	}
}

// The Fast validator and the library's agree on every document, for every
// schema of the subset: the hand-written ones, the delegate tool's and
// random ones.
func TestFastAgreesWithTheLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	schemas := corpus(t, rng)
	agreedValid, agreedInvalid := 0, 0
	for _, raw := range schemas {
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("schema %s: %v", raw, err)
		}
		if fast == nil {
			t.Fatalf("schema %s has no Fast", raw)
		}
		var doc any
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		g := gen{rng: rng}
		for range 300 {
			v := g.value(doc, 0)
			got, want := fast.Valid(v), libraryValid(s, v)
			if got != want {
				text, _ := json.Marshal(v)
				t.Fatalf("schema %s, document %s (%#v): Fast says %v, the library %v", raw, text, v, got, want)
			}
			if got {
				agreedValid++
			} else {
				agreedInvalid++
			}
		}
	}
	// The generator must reach both answers often, or the test says little.
	t.Logf("%d valid and %d invalid documents over %d schemas", agreedValid, agreedInvalid, len(schemas))
	if agreedValid < len(schemas)*30 || agreedInvalid < len(schemas)*30 {
		t.Fatalf("only %d valid and %d invalid documents over %d schemas", agreedValid, agreedInvalid, len(schemas))
	}
}

// corpus is the schemas of the subset the tests draw documents for: the
// hand-written ones, the delegate tool's and random ones.
func corpus(t testing.TB, rng *rand.Rand) []string {
	schemas := append(append([]string{}, supported...), delegateSchemas(t)...)
	for range 300 {
		schemas = append(schemas, randomSchema(rng, 0))
	}
	return schemas
}

// Numbers at the edges of integer-ness and of what big.Rat (the library's
// reader) takes.
func TestFastNumbersAgreeWithTheLibrary(t *testing.T) {
	nums := []string{
		"0", "-0", "0.0", "-0.0", "0e5", "0e-5", "0.000e999", "1", "-1", "1.0", "1.5", "-1.5", "1e0", "1e1", "1e-1", "10e-1", "15e-1",
		"0.1e1", "0.01e1", "100e-2", "101e-2", "1E+2", "1e+0002", "123456789012345678901234567890", "12345678901234567890.0000000001",
		"1e1000000", "1e1000001", "1e-1000000", "1e-1000001", "1.5e1000001", "0.5e-999999", "0.5e-1000000", "1.0e-1000000",
		"9e9223372036854775807", "9e9223372036854775808", "9e-9223372036854775808", "9e-9223372036854775809", "0e9223372036854775808",
		"0.1e-9223372036854775808", "1e00000000000000000000000000001", "9007199254740993", "-9007199254740993", "-9007199254740994",
		"0.001", "0.0009999", "0.00100000", "1000", "1000.0000001", "999.9999999", "-12.5e-3", "-0.0125", "-0.01250001", "-0.0124999",
		"12345678901234567890123", "12345678901234567890122.9", "1.2345678901234567890123e22", "10.25", "10.250", "10.2500001",
	}
	for _, raw := range supported {
		if !strings.Contains(raw, `"n"`) {
			continue
		}
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || fast == nil {
			t.Fatalf("schema %s: %v, %v", raw, fast, err)
		}
		for _, n := range nums {
			doc := map[string]any{"n": json.Number(n)}
			if got, want := fast.Valid(doc), libraryValid(s, doc); got != want {
				t.Errorf("schema %s, n=%s: Fast says %v, the library %v", raw, n, got, want)
			}
		}
	}
}

// Valid answers false, never true, for values the library's reader does
// not make.
func TestFastRefusesForeignValues(t *testing.T) {
	_, fast, err := schema.CompileFast(json.RawMessage(`{}`))
	if err != nil || fast == nil {
		t.Fatal(fast, err)
	}
	for _, v := range []any{1, 1.5, float32(1), []string{}, map[string]string{}, struct{}{}} {
		if fast.Valid(v) {
			t.Errorf("Valid(%#v) = true", v)
		}
	}
}

// The delegate tool's arguments are checked without allocating.
func TestFastAllocatesNothingOnDelegateArgs(t *testing.T) {
	for _, raw := range delegateSchemas(t) {
		_, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || fast == nil {
			t.Fatal(fast, err)
		}
		for _, args := range []string{
			`{"description":"echo","prompt":"echo hi"}`,
			`{"description":"échö","prompt":"` + strings.Repeat("😀", 300) + `","persona":"p","delegation_levels":2,"tools":{"allow":["a","b"],"deny":[]},"output_schema":{"type":"object"}}`,
		} {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
			if err != nil {
				t.Fatal(err)
			}
			fast.Valid(doc)
			if n := testing.AllocsPerRun(100, func() { fast.Valid(doc) }); n != 0 {
				t.Errorf("schema %s, args %s: %v allocations", raw, args, n)
			}
		}
	}
}

// ValidJSON allocates nothing, on the delegate tool's usual arguments and
// on texts with every kind of string, name and number.
func TestValidJSONAllocatesNothing(t *testing.T) {
	for _, c := range []struct{ schema, text string }{
		{delegateSchemas(t)[0], `{"description":"echo","prompt":"echo hi"}`},
		{delegateSchemas(t)[0], ` { "description" : "\u00e9cho\ud83d\ude00" , "\u0070rompt":"` + strings.Repeat("😀", 300) +
			`","tools":{"allow":["a","b"],"deny":[]},"delegation_levels":2.0e0,"output_schema":{"type":"object","x":[1,null,true]}}` + "\n"},
		{`{"type":"object","properties":{"e":{"enum":["é","a/b"]},"n":{"type":"integer","minimum":-1.5,"maximum":12345678901234567890123}}}`,
			`{"e":"a\/b","n":1234567890123456789012.00000000000000000000000000000000000000e0}`},
		{`{"type":"object","properties":{"e":{"enum":["é","a/b"]}}}`, "{\"e\":\"\u00e9\",\"x\":\"\xff\\ud800\"}"},
	} {
		_, fast, err := schema.CompileFast(json.RawMessage(c.schema))
		if err != nil || fast == nil {
			t.Fatal(fast, err)
		}
		raw := []byte(c.text)
		if !fast.ValidJSON(raw) {
			t.Fatalf("schema %s: %s is not valid", c.schema, c.text)
		}
		if n := testing.AllocsPerRun(100, func() { fast.ValidJSON(raw) }); n != 0 {
			t.Errorf("schema %s, text %s: %v allocations", c.schema, c.text, n)
		}
	}
}

func BenchmarkDelegateArgs(b *testing.B) {
	raw := delegateSchemas(b)[0]
	s, fast, err := schema.CompileFast(json.RawMessage(raw))
	if err != nil || fast == nil {
		b.Fatal(fast, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"description":"echo","prompt":"echo hi"}`))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !fast.Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("ValidJSON", func(b *testing.B) {
		raw := []byte(`{"description":"echo","prompt":"echo hi"}`)
		b.ReportAllocs()
		for b.Loop() {
			if !fast.ValidJSON(raw) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("Library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzFastAgreesWithTheLibrary(f *testing.F) {
	docs := []string{`{}`, `{"n":1}`, `{"n":1.0}`, `{"n":"x"}`, `{"s":"ab"}`, `{"s":"é"}`, `{"a":["x"]}`, `{"o":{"x":true}}`, `[]`, `null`,
		`{"description":"d","prompt":"p"}`, `{"description":"d","prompt":"p","tools":{"allow":["a"]},"delegation_levels":0}`}
	for i, raw := range append(append([]string{}, supported...), delegateSchemas(f)...) {
		f.Add(raw, docs[i%len(docs)])
	}
	f.Fuzz(func(t *testing.T, raw, text string) {
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || fast == nil {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return
		}
		if got, want := fast.Valid(doc), libraryValid(s, doc); got != want {
			t.Fatalf("schema %s, document %s: Fast says %v, the library %v", raw, text, got, want)
		}
	})
}

// libraryValid is the library's verdict. It panics comparing a number it
// cannot read (1e1000001 against a minimum): the caller's fallback then
// fails as it always did, so that is "not valid" here.
func libraryValid(s *jsonschema.Schema, v any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return s.Validate(v) == nil
}

// delegateSchemas are the delegate tool's parameter schemas, by its own
// code, with every capability and none, and with small limits.
func delegateSchemas(t testing.TB) []string {
	var out []string
	for _, c := range []struct {
		caps   subagent.Capabilities
		tasks  bool
		limits delegate.Limits
	}{
		{subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, true, delegate.Limits{}},
		{subagent.Capabilities{}, false, delegate.Limits{}},
		{subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, true,
			delegate.Limits{Description: 3, Prompt: 5, Persona: 2, ToolNames: 2, ToolName: 1}},
	} {
		cfg := delegate.Config{Service: fakeService{caps: c.caps}, Provider: "p", Limits: c.limits}
		if c.tasks {
			cfg.Tasks = new(tasks.Manager) // only its presence shapes the spec
		}
		tool := delegate.New(cfg)
		out = append(out, string(tool.Spec().Parameters))
		tool.Close()
	}
	if !strings.Contains(out[0], `"continuable"`) || !strings.Contains(out[0], `"maxItems"`) {
		t.Fatalf("the full delegate schema lacks parameters: %s", out[0])
	}
	return out
}

// fakeService is a Delegator (and Continuer) whose one provider has caps.
type fakeService struct{ caps subagent.Capabilities }

func (f fakeService) Start(context.Context, string, subagent.StartRequest) (subagent.Run, error) {
	return nil, errors.New("fake: no runs")
}

func (f fakeService) GetProvider(string) (subagent.Provider, bool) { return fakeProvider(f), true }

func (f fakeService) Listen(subagent.Listener, ...subagent.ListenOption) subagent.Subscription {
	return noSubscription{}
}

func (f fakeService) StartContinuable(context.Context, string, subagent.StartRequest) (registry.Continuable, error) {
	return registry.Continuable{}, errors.New("fake: no runs")
}

func (f fakeService) CanContinue() bool { return true }

type fakeProvider struct{ caps subagent.Capabilities }

func (p fakeProvider) Name() string                        { return "p" }
func (p fakeProvider) Capabilities() subagent.Capabilities { return p.caps }
func (p fakeProvider) InheritsParentContext() bool         { return false }
func (p fakeProvider) Start(context.Context, subagent.StartRequest) (subagent.Run, error) {
	return nil, errors.New("fake: no runs")
}

// Resume makes the provider one that resumes, so the schema offers
// continuable children.
func (p fakeProvider) Resume(context.Context, subagent.StartRequest) (subagent.Run, error) {
	return nil, errors.New("fake: no runs")
}

type noSubscription struct{}

func (noSubscription) Release()                    {}
func (noSubscription) Flush(context.Context) error { return nil }

// randomSchema draws a schema of the subset.
func randomSchema(rng *rand.Rand, depth int) string {
	if rng.IntN(12) == 0 {
		return []string{"true", "false"}[rng.IntN(2)]
	}
	var kw []string
	add := func(k, v string) { kw = append(kw, quote(k)+":"+v) }
	typeNames := []string{"null", "boolean", "number", "integer", "string", "array", "object"}
	switch rng.IntN(4) {
	case 0: // no type
	case 1:
		var list []string
		for _, i := range rng.Perm(len(typeNames))[:1+rng.IntN(3)] {
			list = append(list, quote(typeNames[i]))
		}
		add("type", "["+strings.Join(list, ",")+"]")
	default:
		if depth == 0 {
			add("type", `"object"`)
		} else {
			add("type", quote(typeNames[rng.IntN(len(typeNames))]))
		}
	}
	if rng.IntN(3) == 0 {
		add("minLength", strconv.Itoa(rng.IntN(4)))
	}
	if rng.IntN(3) == 0 {
		add("maxLength", strconv.Itoa(rng.IntN(6)))
	}
	if rng.IntN(5) == 0 {
		var list []string
		for range rng.IntN(4) {
			list = append(list, quote(randomString(rng, 3)))
		}
		add("enum", "["+strings.Join(list, ",")+"]")
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if rng.IntN(4) == 0 {
			add(k, randomNumber(rng, false))
		}
	}
	if depth < 3 && rng.IntN(3) == 0 {
		add("items", randomSchema(rng, depth+1))
	}
	if rng.IntN(4) == 0 {
		add("minItems", strconv.Itoa(rng.IntN(3)))
	}
	if rng.IntN(4) == 0 {
		add("maxItems", strconv.Itoa(rng.IntN(4)))
	}
	if depth < 3 && (depth == 0 || rng.IntN(2) == 0) {
		var props []string
		names := []string{"a", "b", "c", "é"}
		for _, i := range rng.Perm(len(names))[:rng.IntN(len(names)+1)] {
			props = append(props, quote(names[i])+":"+randomSchema(rng, depth+1))
		}
		add("properties", "{"+strings.Join(props, ",")+"}")
		if rng.IntN(2) == 0 {
			var req []string
			for _, i := range rng.Perm(len(names))[:rng.IntN(3)] {
				req = append(req, quote(names[i]))
			}
			add("required", "["+strings.Join(req, ",")+"]")
		}
	}
	switch rng.IntN(4) {
	case 0:
		add("additionalProperties", "false")
	case 1:
		add("additionalProperties", "true")
	case 2:
		if depth < 3 {
			add("additionalProperties", randomSchema(rng, depth+1))
		}
	}
	if rng.IntN(4) == 0 {
		add("description", `"d"`)
	}
	rng.Shuffle(len(kw), func(i, j int) { kw[i], kw[j] = kw[j], kw[i] })
	return "{" + strings.Join(kw, ",") + "}"
}

// randomNumber is JSON number text near the small integers, in many
// spellings, now and then far away or, when wild, beyond big.Rat.
func randomNumber(rng *rand.Rand, wild bool) string {
	switch rng.IntN(12) {
	case 0:
		if !wild {
			return []string{"123456789012345678901234567890", "-0.000000000000000000001", "1e300", "-1e-300"}[rng.IntN(4)]
		}
		return []string{"1e1000001", "-1e1000001", "1e-1000001", "0e99999999999999999999", "9e9223372036854775808",
			"123456789012345678901234567890", "-0.000000000000000000001", "1e300", "-1e-300"}[rng.IntN(9)]
	case 1:
		return strconv.Itoa(rng.IntN(2000) - 1000)
	}
	n := rng.IntN(41) - 20 // tenths from -2.0 to 2.0
	neg := n < 0
	if neg {
		n = -n
	}
	var s string
	switch rng.IntN(5) {
	case 0:
		s = fmt.Sprintf("%d.%d", n/10, n%10)
	case 1:
		s = fmt.Sprintf("%de-1", n)
	case 2:
		s = fmt.Sprintf("%d00e-3", n)
		if n == 0 {
			s = "0e-3"
		}
	case 3:
		s = fmt.Sprintf("0.%03de1", n*10)
	default:
		if n%10 != 0 {
			s = fmt.Sprintf("%d.%d0", n/10, n%10)
		} else {
			s = fmt.Sprintf("%d", n/10)
		}
	}
	if neg {
		s = "-" + s
	}
	return s
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func randomString(rng *rand.Rand, maxRunes int) string {
	alphabet := []string{"a", "b", "é", "😀", "\xff", "x", " "}
	var b strings.Builder
	for range rng.IntN(maxRunes + 1) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// gen draws documents for a schema, mostly near what it allows.
type gen struct{ rng *rand.Rand }

func (g gen) value(schema any, depth int) any {
	s, _ := schema.(map[string]any)
	if g.rng.IntN(10) == 0 || s == nil || depth > 4 {
		return g.any(depth)
	}
	var want []string
	switch t := s["type"].(type) {
	case string:
		want = []string{t}
	case []any:
		for _, e := range t {
			want = append(want, e.(string))
		}
	}
	if g.rng.IntN(8) == 0 || len(want) == 0 {
		want = []string{"null", "boolean", "number", "integer", "string", "array", "object"}
	}
	switch want[g.rng.IntN(len(want))] {
	case "null":
		return nil
	case "boolean":
		return g.rng.IntN(2) == 0
	case "number", "integer":
		return json.Number(randomNumber(g.rng, true))
	case "string":
		if e, ok := s["enum"].([]any); ok && len(e) > 0 && g.rng.IntN(4) != 0 {
			return e[g.rng.IntN(len(e))]
		}
		return randomString(g.rng, 6)
	case "array":
		a := make([]any, 0)
		for range g.rng.IntN(5) {
			a = append(a, g.value(s["items"], depth+1))
		}
		return a
	}
	obj := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) { // in order: the same draws every run
		p := props[name]
		if g.rng.IntN(4) != 0 {
			obj[name] = g.value(p, depth+1)
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok && g.rng.IntN(3) != 0 {
				obj[r.(string)] = g.value(props[r.(string)], depth+1)
			}
		}
	}
	if g.rng.IntN(5) == 0 {
		obj[[]string{"z", "a", "description", "tools"}[g.rng.IntN(4)]] = g.value(s["additionalProperties"], depth+1)
	}
	return obj
}

// any is an arbitrary document.
func (g gen) any(depth int) any {
	switch g.rng.IntN(7) {
	case 0:
		return nil
	case 1:
		return g.rng.IntN(2) == 0
	case 2:
		return json.Number(randomNumber(g.rng, true))
	case 3:
		return randomString(g.rng, 4)
	case 4:
		if depth < 4 {
			return []any{g.any(depth + 1)}
		}
		return []any{}
	}
	if depth < 4 {
		return map[string]any{"a": g.any(depth + 1)}
	}
	return map[string]any{}
}

// ValidJSON answers, for every text, what Valid answers for the document
// the library reads from it, and false for what it does not read: over
// the corpus's schemas, documents drawn for them, spelled in many ways
// and now and then garbled.
func TestValidJSONAgreesWithValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var n validJSONCounts
	hand := len(supported) + len(delegateSchemas(t)) // corpus's first schemas
	for i, raw := range corpus(t, rng) {
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || fast == nil {
			t.Fatalf("schema %s: %v, %v", raw, fast, err)
		}
		var doc any
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		g := gen{rng: rng}
		for range 200 {
			var b strings.Builder
			g.spell(&b, g.value(doc, 0), 0)
			text := b.String()
			if rng.IntN(6) == 0 {
				text = g.garble(text)
			}
			n.add(checkValidJSON(t, s, fast, raw, text))
		}
		if i < hand { // the schemas whose names the texts use
			for _, text := range awkwardTexts {
				n.add(checkValidJSON(t, s, fast, raw, text))
			}
		}
	}
	// Every kind of text must come up often, or the test says little.
	t.Logf("%+v", n)
	if n.valid < 15000 || n.invalid < 15000 || n.notJSON < 4000 || n.repeats < 2000 || n.repeatsValid < 300 || n.escaped < 15000 {
		t.Fatalf("too few of a kind: %+v", n)
	}
}

// validJSONCounts counts the texts checkValidJSON saw, by kind.
type validJSONCounts struct{ valid, invalid, notJSON, repeats, repeatsValid, escaped int }

func (n *validJSONCounts) add(k validJSONKind) {
	switch {
	case k.notJSON:
		n.notJSON++
	case k.valid:
		n.valid++
	default:
		n.invalid++
	}
	if k.repeats {
		n.repeats++
		if k.valid {
			n.repeatsValid++
		}
	}
	if k.escaped {
		n.escaped++
	}
}

type validJSONKind struct{ valid, notJSON, repeats, escaped bool }

// awkwardTexts are texts ValidJSON is checked on for the hand-written and
// the delegate tool's schemas: escapes, repeated names, whitespace,
// numbers, bytes that are not UTF-8, data after the value, nesting.
var awkwardTexts = []string{
	``, ` `, `{`, `}`, `{}`, ` {} `, "\t{\r\n}\n", `{}{}`, `{} {}`, `{},`, `{}x`, `{} x`, "\ufeff{}", "{}\x00", `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`,
	`{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `{"a" 1}`, `{a:1}`, `{'a':1}`, `{"a":1}}`, `{"a":[}`, `{"n":1]`,
	`null`, `true`, `false`, `nul`, `tru`, `fals`, `truex`, `nullx`, `"x"`, `1`, `-1.5e3`,
	`{"n":1}`, `{"n":1.0}`, `{"n":1e2}`, `{"n":1E+2}`, `{"n":-0}`, `{"n":-0.0e-0}`, `{"n":15e-1}`, `{"n":0.1e1}`, `{"n":1e1000001}`,
	`{"n":9e9223372036854775808}`, `{"n":123456789012345678901234567890}`, `{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`, `{"n":+1}`,
	`{"n":1e}`, `{"n":1e+}`, `{"n":0x1}`, `{"n":NaN}`, `{"n":Infinity}`, `{"n":--1}`, `{"n":1.5.1}`,
	`{"n":1,"n":2}`, `{"n":"x","n":1}`, `{"n":1,"n":"x"}`, `{"n":null,"n":null}`, `{"\u006e":1}`, `{"\u006E":"x"}`, `{"n\u0000":1}`,
	`{"s":"ab"}`, `{"s":"a\u0062"}`, `{"s":"\u00e9\u00E9"}`, `{"s":"\ud83d\ude00\ud83d\ude00"}`, `{"s":"\ud83d"}`, `{"s":"\ude00\ud83d"}`,
	`{"s":"\ud83dx"}`, `{"s":"\ud83d\u0041"}`, `{"s":"\ud83d\ud83d\ude00"}`, `{"s":"\ud83d\\ude00"}`, `{"s":"\"\\\/\b\f\n\r\t"}`,
	`{"s":"\x"}`, `{"s":"\'"}`, `{"s":"\u12"}`, `{"s":"\u12g4"}`, `{"s":"\u"}`, `{"s":"\`, `{"s":"a`, `{"s":"\ud83d\u12"}`,
	"{\"s\":\"\x01\"}", "{\"s\":\"\t\"}", "{\"s\":\"a\nb\"}", "{\"s\":\"\x1f\"}", "{\"e\":\"\xff\"}", "{\"e\":\"a\x80\"}",
	"{\"s\":\"\x7f\"}", "{\"s\":\"\xff\"}", "{\"s\":\"\xff\xfe\"}", "{\"s\":\"\xe2\x80\"}", "{\"s\":\"a\xe2\x80\xa8b\"}",
	"{\"s\":\"\xc3\xa9\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"\xff\":1}", `{"s":"\ufffd"}`, `{"s":"😀"}`, `{"s":"a/b"}`, `{"s":"a\/b"}`,
	`{"e":"\u00e9"}`, `{"e":"\u0061"}`, `{"e":"a\/"}`, `{"e":"\"\\\b"}`, `{"e":"\u0022\u005C\u0008"}`, `{"e":"a\/b"}`, `{"e":"\ud83d\ude00"}`,
	`{"\u00e9":"\u00e9"}`, "{\"\u00e9\":\"\xc3\xa9\"}", `{"a":["\u0078","x\u0079"]}`, `{"a":[1,2,3,4]}`, `{"a":[]}`,
	`{"o":{"x":true,"x":1}}`, `{"o":{"x":1,"x":true}}`, `{"o":{"\u0078":true}}`, `{"o":{}}`, `{"o":{"x":true,"y":null}}`,
	`{"description":"d","prompt":"p"}`, `{"description":"d","prompt":"p","prompt":"p"}`, `{"description":"\u0064","\u0070rompt":"p"}`,
	`{"\u0064":"d","prompt":"p"}`, `{"\u0064escription":"d","prompt":"p"}`,
	`{"description":"d","prompt":"p","tools":{"allow":["a"],"deny":["b","c"]},"delegation_levels":1.0,"continuable":false}`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`, `{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"o":` + strings.Repeat(`{"o":`, 63) + `1` + strings.Repeat("}", 64),
}

// checkValidJSON checks fast.ValidJSON on text against what fast.Valid
// and the library answer for the document the library reads from text,
// schema raw's: the same, or false where ValidJSON says it cannot tell.
func checkValidJSON(t testing.TB, s *jsonschema.Schema, fast *schema.Fast, raw, text string) validJSONKind {
	t.Helper()
	got := fast.ValidJSON([]byte(text))
	k := validJSONKind{valid: got, escaped: strings.Contains(text, `\`)}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		if got {
			t.Fatalf("schema %s, text %q, not JSON (%v): ValidJSON says true", raw, text, err)
		}
		k.notJSON = true
		return k
	}
	want := fast.Valid(doc)
	if lib := libraryValid(s, doc); lib != want {
		t.Fatalf("schema %s, text %q: Valid says %v, the library %v", raw, text, want, lib)
	}
	repeats, depth := shape(text)
	k.repeats = repeats
	if got && !want || !got && want && !repeats && depth <= 64 && !requiresMany(raw) {
		t.Fatalf("schema %s, text %q: ValidJSON says %v, Valid %v", raw, text, got, want)
	}
	return k
}

// shape tells, of JSON text, whether an object in it gives a name twice and
// how deep its values nest, the top one being at 0 (ValidJSON reads 64
// deep).
func shape(text string) (repeats bool, depth int) {
	d := json.NewDecoder(strings.NewReader(text))
	var walk func(level int)
	walk = func(level int) {
		depth = max(depth, level)
		tok, err := d.Token()
		if err != nil {
			return
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				name, err := d.Token()
				if err != nil {
					return
				}
				repeats = repeats || seen[name.(string)]
				seen[name.(string)] = true
				walk(level + 1)
			}
			_, _ = d.Token()
		case json.Delim('['):
			for d.More() {
				walk(level + 1)
			}
			_, _ = d.Token()
		}
	}
	walk(0)
	return repeats, depth
}

// requiresMany reports whether a schema of raw requires more than 64
// names, which ValidJSON does not count.
func requiresMany(raw string) bool {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["required"].([]any); ok && len(r) > 64 {
				return true
			}
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	var doc any
	return json.Unmarshal([]byte(raw), &doc) == nil && walk(doc)
}

// Where ValidJSON cannot tell, it says false: the general validator
// decides.
func TestValidJSONDeclinesWhatItCannotTell(t *testing.T) {
	var names []string
	var obj []string
	for i := range 65 {
		names = append(names, quote(strconv.Itoa(i)))
		obj = append(obj, quote(strconv.Itoa(i))+":1")
	}
	for _, c := range []struct {
		schema, text string
		valid        bool // what the library says
	}{
		{`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":"x","n":1}`, true},
		{`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1,"n":"x"}`, false},
		{`{"type":"object","additionalProperties":false}`, `{"n":1,"n":1}`, false},
		{`{"type":"array"}`, strings.Repeat("[", 66) + strings.Repeat("]", 66), true},
		{`{"type":"object","required":[` + strings.Join(names, ",") + `]}`, "{" + strings.Join(obj, ",") + "}", true},
		{`{"type":"object","required":[` + strings.Join(names[:64], ",") + `]}`, "{" + strings.Join(obj[:64], ",") + "}", true},
	} {
		s, fast, err := schema.CompileFast(json.RawMessage(c.schema))
		if err != nil || fast == nil {
			t.Fatal(fast, err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(c.text))
		if err != nil {
			t.Fatal(err)
		}
		if lib := libraryValid(s, doc); lib != c.valid {
			t.Fatalf("schema %s, text %s: the library says %v", c.schema, c.text, lib)
		}
		repeats, depth := shape(c.text)
		exact := !repeats && depth <= 64 && !requiresMany(c.schema)
		if got := fast.ValidJSON([]byte(c.text)); got && !c.valid || exact && got != c.valid || !exact && got {
			t.Errorf("schema %s, text %s: ValidJSON says %v", c.schema, c.text, got)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for i, raw := range append(append([]string{}, supported...), delegateSchemas(f)...) {
		f.Add(raw, awkwardTexts[i%len(awkwardTexts)])
		f.Add(raw, awkwardTexts[(i*7+3)%len(awkwardTexts)])
	}
	f.Fuzz(func(t *testing.T, raw, text string) {
		s, fast, err := schema.CompileFast(json.RawMessage(raw))
		if err != nil || fast == nil {
			return
		}
		checkValidJSON(t, s, fast, raw, text)
	})
}

// spell writes v, a document as gen draws them, as JSON text in one of its
// many spellings: whitespace between tokens, escapes in strings (some that
// change the string: the reader decides what it is), names in any order
// and some given twice, another value first or the same one again.
func (g gen) spell(b *strings.Builder, v any, depth int) {
	g.space(b)
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(string(v))
	case string:
		g.quote(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			g.spell(b, e, depth+1)
		}
		g.space(b)
		b.WriteByte(']')
	case map[string]any:
		names := slices.Sorted(maps.Keys(v))
		g.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		b.WriteByte('{')
		first := true
		member := func(name string, v any) {
			if !first {
				b.WriteByte(',')
			}
			first = false
			g.space(b)
			g.quote(b, name)
			g.space(b)
			b.WriteByte(':')
			g.spell(b, v, depth+1)
			g.space(b)
		}
		for _, name := range names {
			switch g.rng.IntN(12) {
			case 0:
				member(name, g.any(depth+1))
			case 1:
				member(name, v[name])
			}
			member(name, v[name])
		}
		g.space(b)
		b.WriteByte('}')
	}
	if depth == 0 {
		g.space(b)
	}
}

// space writes whitespace, now and then.
func (g gen) space(b *strings.Builder) {
	if g.rng.IntN(8) == 0 {
		b.WriteString([]string{" ", "\t", "\n", "\r", " \r\n  "}[g.rng.IntN(5)])
	}
}

// quote writes s as a JSON string, escaping some of its runes, leaving
// bytes that are not UTF-8 as they are or writing them as U+FFFD, and now
// and then adding a \u escape of a lone surrogate.
func (g gen) quote(b *strings.Builder, s string) {
	u := func(r rune) {
		f := "\\u%04x"
		if g.rng.IntN(2) == 0 {
			f = "\\u%04X"
		}
		fmt.Fprintf(b, f, r)
	}
	b.WriteByte('"')
	for i, r := range s {
		if g.rng.IntN(40) == 0 {
			u([]rune{0xd800, 0xdbff, 0xdc00, 0xdfff}[g.rng.IntN(4)])
		}
		switch escape := g.rng.IntN(4) == 0; {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"): // a byte that is not UTF-8
			if escape {
				u(0xfffd)
			} else {
				b.WriteByte(s[i])
			}
		case r == utf8.RuneError && escape && g.rng.IntN(2) == 0: // U+FFFD, as a byte that is not UTF-8
			b.WriteString([]string{"\xff", "\xfe", "\x80"}[g.rng.IntN(3)])
		case escape && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
		case escape:
			if e, ok := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[r]; ok && g.rng.IntN(2) == 0 {
				b.WriteString(e)
			} else {
				u(r)
			}
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < ' ':
			u(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// garble spoils text, most of the time, as JSON: cut short, a byte more,
// a byte less, something after it.
func (g gen) garble(text string) string {
	i := g.rng.IntN(len(text) + 1)
	junk := []string{"{", "}", "[", "]", `"`, ",", ":", `\`, " ", "\t", "\n", "0", "-", ".", "e", "x", "\x01", "\xff", "{}", "null"}
	switch g.rng.IntN(4) {
	case 0:
		return text[:i]
	case 1:
		return text[:i] + junk[g.rng.IntN(len(junk))] + text[i:]
	case 2:
		if i < len(text) {
			return text[:i] + text[i+1:]
		}
		return text
	}
	return text + junk[g.rng.IntN(len(junk))]
}
