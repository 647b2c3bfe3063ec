package agent

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/schema"
)

// fastParams are parameter schemas the schema package's Fast validator
// takes, the delegate tool's shape first.
var fastParams = []string{
	`{"additionalProperties":false,"properties":{"continuable":{"description":"c","type":"boolean"},"delegation_levels":{"description":"l","minimum":0,"type":"integer"},"description":{"description":"d","maxLength":5,"type":"string"},"output_schema":{"description":"o","type":"object"},"persona":{"description":"p","maxLength":3,"type":"string"},"prompt":{"description":"p","maxLength":8,"type":"string"},"tools":{"additionalProperties":false,"description":"t","properties":{"allow":{"items":{"maxLength":2,"type":"string"},"maxItems":2,"type":"array"},"deny":{"items":{"maxLength":2,"type":"string"},"maxItems":2,"type":"array"}},"type":"object"}},"required":["description","prompt"],"type":"object"}`,
	`{"type":"object","properties":{"n":{"type":["integer","null"],"exclusiveMaximum":10},"e":{"enum":["a","é"]}},"required":["n"]}`,
}

// With a Fast validator, checkArgs still answers exactly as the schema
// package's validation does, wording included; and the validator's
// ValidJSON answers as its Valid does on what readArgs reads, but where a
// name is given twice (false then, when Valid is true: see ValidJSON).
func TestCheckArgsWithAFastValidatorAgreesWithTheSchemaPackage(t *testing.T) {
	for _, params := range fastParams {
		if _, fast, err := schema.CompileFast(json.RawMessage(params)); err != nil || fast == nil {
			t.Fatalf("schema %s: no Fast validator (%v)", params, err)
		}
	}
	values := []string{`"d"`, `"é😀é"`, `"far too long"`, `"\u00e9"`, `""`, `0`, `-1`, `1.0`, `2.5`, `1e1`, `10`, `9.99`, `null`, `true`,
		`{}`, `{"type":"object"}`, `{"allow":["a"]}`, `{"allow":["a","b","c"]}`, `{"deny":["abc"]}`, `{"only":[]}`, `[]`, `["x"]`,
		`"\u0065cho"`, `"\ud83d\ude00"`, `"\ud83d"`, `"a\/b"`, `"a\"b"`, "\"\xff\"", "\"\xc3\xa9\"", `"\u00E9"`, `1E1`, `-0`, `9.9e0`,
		`{"allow":["\u0061"],"allow":["a","b","c"]}`, `{"allow":["a","b","c"],"allow":["a"]}`}
	keys := []string{"description", "prompt", "persona", "delegation_levels", "output_schema", "tools", "continuable", "n", "e", "extra"}
	spellings := map[string]string{"description": `descr\u0069ption`, "prompt": `\u0070rompt`, "n": `\u006e`}
	rng := rand.New(rand.NewPCG(7, 8))
	a := &Agent{}
	valid, validJSON, read := 0, 0, 0
	for range 6000 {
		params := fastParams[rng.IntN(len(fastParams))]
		var fields []string
		repeats := false
		for _, k := range keys {
			if rng.IntN(3) == 0 || (k == "description" || k == "prompt" || k == "n") && rng.IntN(8) != 0 {
				times := 1
				if rng.IntN(10) == 0 {
					times, repeats = 2, true
				}
				for range times {
					text := k
					if spellings[k] != "" && rng.IntN(4) == 0 {
						text = spellings[k]
					}
					v := values[rng.IntN(len(values))]
					repeats = repeats || strings.Count(v, `"allow"`) > 1
					fields = append(fields, `"`+text+`":`+v)
				}
			}
		}
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		comma := []string{",", ",", ",", ", ", " ,\n"}[rng.IntN(5)] // readArgs takes compact JSON only
		args := "{" + strings.Join(fields, comma) + "}"
		s, fast, err := schema.CompileFast(json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		want := schema.ValidateArgs(s, args)
		got := a.checkArgs(ToolSpec{Parameters: json.RawMessage(params)}, json.RawMessage(args))
		if (got == nil) != (want == nil) || got != nil && !sameWording(got.Error(), want.Error()) {
			t.Fatalf("schema %s, args %s: checkArgs says %v, the schema package %v", params, args, got, want)
		}
		if got == nil {
			valid++
		}
		ok := fast.ValidJSON([]byte(args))
		if ok && want != nil {
			t.Fatalf("schema %s, args %s: ValidJSON says true, the schema package %v", params, args, want)
		}
		if ok {
			validJSON++
		}
		if doc, read1 := readArgs(args); read1 {
			read++
			if v := fast.Valid(doc); ok && !v || !ok && v && !repeats {
				t.Fatalf("schema %s, args %s: ValidJSON says %v, Valid on what readArgs reads %v", params, args, ok, v)
			}
		}
	}
	if valid < 300 || validJSON < valid*4/5 || read < 3000 {
		t.Fatalf("only %d valid arguments drawn (%d by ValidJSON), %d read", valid, validJSON, read)
	}
}

// With a Fast validator, checking the delegate tool's usual arguments
// allocates nothing.
func TestCheckArgsWithAFastValidatorAllocatesNothing(t *testing.T) {
	a, spec := &Agent{}, ToolSpec{Parameters: json.RawMessage(fastParams[0])}
	args := json.RawMessage(`{"description":"echo","prompt":"echo hi"}`)
	if err := a.checkArgs(spec, args); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.checkArgs(spec, args) }); n != 0 {
		t.Fatalf("checkArgs: %v allocations", n)
	}
}

// BenchmarkCheckArgs checks the delegate tool's usual arguments: the text
// itself (ValidJSON) against reading it first (readArgs, then Valid).
func BenchmarkCheckArgs(b *testing.B) {
	a, spec := &Agent{}, ToolSpec{Parameters: json.RawMessage(fastParams[0])}
	args := json.RawMessage(`{"description":"echo","prompt":"echo hi"}`)
	_, fast, err := schema.CompileFast(spec.Parameters)
	if err != nil || fast == nil {
		b.Fatal(fast, err)
	}
	b.Run("checkArgs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := a.checkArgs(spec, args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readArgsThenValid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if doc, ok := readArgs(string(args)); !ok || !fast.Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
}

// sameWording compares messages of the schema package. Which of several
// failures it reports first, and in which order it lists a place's
// reasons, follow map order: the same message in any order, and any
// message when there were several places.
func sameWording(a, b string) bool {
	if strings.Contains(a, "more problem") && strings.Contains(b, "more problem") {
		return true
	}
	x, y := []byte(a), []byte(b)
	slices.Sort(x)
	slices.Sort(y)
	return string(x) == string(y)
}
