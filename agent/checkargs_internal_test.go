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
// package's validation does, wording included.
func TestCheckArgsWithAFastValidatorAgreesWithTheSchemaPackage(t *testing.T) {
	for _, params := range fastParams {
		if _, fast, err := schema.CompileFast(json.RawMessage(params)); err != nil || fast == nil {
			t.Fatalf("schema %s: no Fast validator (%v)", params, err)
		}
	}
	values := []string{`"d"`, `"é😀é"`, `"far too long"`, `"\u00e9"`, `""`, `0`, `-1`, `1.0`, `2.5`, `1e1`, `10`, `9.99`, `null`, `true`,
		`{}`, `{"type":"object"}`, `{"allow":["a"]}`, `{"allow":["a","b","c"]}`, `{"deny":["abc"]}`, `{"only":[]}`, `[]`, `["x"]`}
	keys := []string{"description", "prompt", "persona", "delegation_levels", "output_schema", "tools", "continuable", "n", "e", "extra"}
	rng := rand.New(rand.NewPCG(7, 8))
	a := &Agent{}
	valid := 0
	for range 4000 {
		params := fastParams[rng.IntN(len(fastParams))]
		var fields []string
		for _, k := range keys {
			if rng.IntN(3) == 0 || (k == "description" || k == "prompt" || k == "n") && rng.IntN(8) != 0 {
				fields = append(fields, `"`+k+`":`+values[rng.IntN(len(values))])
			}
		}
		args := "{" + strings.Join(fields, ",") + "}"
		s, err := schema.Compile(json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		_, want := schema.Validate(s, args)
		got := a.checkArgs(ToolSpec{Parameters: json.RawMessage(params)}, json.RawMessage(args))
		if (got == nil) != (want == nil) || got != nil && !sameWording(got.Error(), want.Error()) {
			t.Fatalf("schema %s, args %s: checkArgs says %v, the schema package %v", params, args, got, want)
		}
		if got == nil {
			valid++
		}
	}
	if valid < 100 {
		t.Fatalf("only %d valid arguments drawn", valid)
	}
}

// With a Fast validator, checking arguments costs only their reading.
func TestCheckArgsWithAFastValidatorAllocatesOnlyToRead(t *testing.T) {
	a, spec := &Agent{}, ToolSpec{Parameters: json.RawMessage(fastParams[0])}
	args := json.RawMessage(`{"description":"echo","prompt":"echo hi"}`)
	if err := a.checkArgs(spec, args); err != nil {
		t.Fatal(err)
	}
	reading := testing.AllocsPerRun(100, func() { readArgs(string(args)) })
	if n := testing.AllocsPerRun(100, func() { _ = a.checkArgs(spec, args) }); n > reading {
		t.Fatalf("checkArgs: %v allocations, reading the arguments %v", n, reading)
	}
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
