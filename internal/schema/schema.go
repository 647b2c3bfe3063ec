// Package schema compiles the object-rooted JSON Schemas that constrain a
// child's structured output, for the Service (validation before any provider
// runs) and the agent loop (checking the final answer) alike.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNotObject means the schema's root does not describe an object.
var ErrNotObject = errors.New(`schema: root must have "type": "object"`)

// Compile parses and compiles raw, which must be rooted at an object type.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil, ErrNotObject
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output.json", doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile("output.json")
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

// Validate checks that text is JSON satisfying s and returns it compacted.
func Validate(s *jsonschema.Schema, text string) (json.RawMessage, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		return nil, fmt.Errorf("output is not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return nil, fmt.Errorf("output does not match the schema: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
