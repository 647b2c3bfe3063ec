// Package schema compiles the JSON Schemas that constrain a child's
// structured output, for the Service (validation before any provider runs)
// and the agent loop (checking the final answer) alike.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNotObject means a schema's root does not describe an object.
var ErrNotObject = errors.New(`schema: root must have "type": "object"`)

// Compile compiles raw without ever reading a referenced document: schemas
// come from callers and models, so a $ref must not reach the file system or
// the network.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no schemes: every external $ref fails
	const loc = "output-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

// CompileObject is Compile for a schema that must be rooted at an object,
// as the Service requires of an output schema.
func CompileObject(raw json.RawMessage) (*jsonschema.Schema, error) {
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &root); err != nil || root.Type != "object" {
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		return nil, ErrNotObject
	}
	return Compile(raw)
}

// Validate checks that text is JSON satisfying s and returns it trimmed.
func Validate(s *jsonschema.Schema, text string) (json.RawMessage, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("final answer is not JSON: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return nil, fmt.Errorf("final answer does not match the output schema: %w", err)
	}
	return json.RawMessage(strings.TrimSpace(text)), nil
}
