package schema_test

import (
	"encoding/json"
	"errors"
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
