package schema_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Contract S4.
func TestS4_CompileObjectRejectsNonObjectRootsAndBadSchemas(t *testing.T) {
	for raw, wantNotObject := range map[string]bool{
		`{"type":"array"}`: true,
		`{}`:               true,
		`[]`:               false,
		`{"type":"object","properties":{"a":{"type":7}}}`:                    false,
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`: false,
		`{`: false,
	} {
		_, err := schema.CompileObject(json.RawMessage(raw))
		if err == nil || errors.Is(err, schema.ErrNotObject) != wantNotObject {
			t.Errorf("CompileObject(%s) = %v", raw, err)
		}
	}
}

func TestValidateAcceptsMatchingJSONOnly(t *testing.T) {
	s, err := schema.CompileObject(json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := schema.Validate(s, " {\"n\": 3}\n"); err != nil || string(got) != `{"n": 3}` {
		t.Fatalf("Validate(match) = %s, %v", got, err)
	}
	if _, err := schema.Validate(s, `{"n":"three"}`); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("Validate(mismatch) = %v", err)
	}
	if _, err := schema.Validate(s, `three`); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("Validate(text) = %v", err)
	}
}

// Contract S4 (and K3: the message reaches models and remote callers): a
// schema that does not compile is reported by its place in the schema and
// the reason, without this process's paths or the metaschema's trace.
func TestS4_CompileErrorNamesThePlaceInTheSchemaOnly(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		`{"type":"object","properties":{"x":{"type":7}}}`:                   "at /properties/x/type: ",
		`{"type":"object","properties":{"a/b":{"minLength":-1}}}`:           "at /properties/a~1b/minLength: ",
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`:   `"#/$defs/missing"`,
		`{"type":"object","properties":{"x":{"$ref":"other.json"}}}`:        `"other.json"`,
		`{"type":"object","required":"x","properties":{"y":{"enum":"no"}}}`: "at /properties/y/enum: ",
		`{`: "not a JSON object",
	} {
		_, err := schema.CompileObject(json.RawMessage(raw))
		var serr *schema.Error
		if !errors.As(err, &serr) || !errors.Is(err, schema.ErrInvalid) {
			t.Errorf("CompileObject(%s) = %v, want a *schema.Error", raw, err)
			continue
		}
		msg := err.Error()
		for _, leak := range []string{cwd, "file://", "metaschema", "mem:", "json-schema.org", "allOf"} {
			if strings.Contains(msg, leak) {
				t.Errorf("CompileObject(%s): message %q shows %q", raw, msg, leak)
			}
		}
		if !strings.Contains(msg, want) {
			t.Errorf("CompileObject(%s): message %q does not name %q", raw, msg, want)
		}
	}
	// The pointer and the reason are there for callers that format their own.
	_, err = schema.Compile(json.RawMessage(`{"type":"object","properties":{"x":{"type":7}}}`))
	var serr *schema.Error
	if !errors.As(err, &serr) || serr.Pointer != "/properties/x/type" || !strings.Contains(serr.Reason, "want") {
		t.Fatalf("Compile: %#v", err)
	}
}

// A final answer that does not match is reported without the schema's URL.
func TestValidateErrorShowsNoPaths(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.CompileObject(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = schema.Validate(s, `{"n":"three"}`)
	if err == nil || !strings.Contains(err.Error(), "at /n: ") || strings.Contains(err.Error(), cwd) || strings.Contains(err.Error(), "file://") {
		t.Fatalf("Validate(mismatch) = %v", err)
	}
}
