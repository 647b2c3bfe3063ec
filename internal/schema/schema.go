// Package schema compiles the JSON Schemas that constrain a child's
// structured output, for the Service (validation before any provider runs)
// and the agent loop (checking the final answer) alike.
//
// Its errors describe the schema or the answer only: a JSON pointer inside
// the document and the reason. They never show the URL the library gives the
// schema (which, by default, would be a file:// URL under the process's
// working directory) nor the metaschema it was checked against, since they
// reach models and remote callers.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/subactor/subactor/internal/jsonv2"
)

// ErrNotObject means a schema's root does not describe an object.
var ErrNotObject = errors.New(`schema: root must have "type": "object"`)

// ErrInvalid is matched by every *Error: a schema that does not compile.
var ErrInvalid = errors.New("schema: invalid")

// Error is a schema that does not compile.
type Error struct {
	// Pointer is the JSON pointer, inside the schema, of the value at fault;
	// empty when the fault is the document as a whole or has no one place
	// (not JSON, a reference that cannot be resolved).
	Pointer string
	// Reason says what is wrong there.
	Reason string
}

func (e *Error) Error() string {
	if e.Pointer == "" {
		return "schema: " + e.Reason
	}
	return fmt.Sprintf("schema: at %s: %s", e.Pointer, e.Reason)
}

// Unwrap makes every *Error match ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// base is the URL the compiler knows the schema by. It is hierarchical so
// that relative references resolve (and fail, having no loader) as they
// would on disk, and not a file path, so it shows nothing of this machine.
const (
	baseDir = "mem:///"
	base    = baseDir + "output-schema.json"
)

// Compile compiles raw without ever reading a referenced document: schemas
// come from callers and models, so a $ref must not reach the file system or
// the network. Its errors are *Error. A compiled schema is immutable and
// compiling costs far more than validating (tens of microseconds and
// hundreds of allocations), so results are kept by their text, process
// wide, for the next agent with the same tools or output schema.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	cache.mu.Lock()
	r, ok := cache.m[string(raw)] // no copy of raw for a lookup
	cache.mu.Unlock()
	if ok {
		return r.s, r.err
	}
	r.s, r.err = compile(raw)
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if len(cache.m) >= cacheSize {
		clear(cache.m) // bounded: a process that makes schemas without end recompiles
	}
	cache.m[string(raw)] = r
	return r.s, r.err
}

// cacheSize bounds the compiled schemas kept.
const cacheSize = 1024

type compiled struct {
	s   *jsonschema.Schema
	err error
}

var cache = struct {
	mu sync.Mutex
	m  map[string]compiled
}{m: map[string]compiled{}}

func compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &Error{Reason: "not JSON: " + err.Error()}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no schemes: every external $ref fails
	if err := c.AddResource(base, doc); err != nil {
		return nil, compileError(err)
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, compileError(err)
	}
	return s, nil
}

// CompileObject is Compile for a schema that must be rooted at an object,
// as the Service requires of an output schema.
func CompileObject(raw json.RawMessage) (*jsonschema.Schema, error) {
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, &Error{Reason: "not a JSON object: " + err.Error()}
	}
	if root.Type != "object" {
		return nil, ErrNotObject
	}
	return Compile(raw)
}

// Validate checks that text, a final answer, is JSON satisfying s, the
// output schema, and returns it trimmed.
func Validate(s *jsonschema.Schema, text string) (json.RawMessage, error) {
	return validate(s, []byte(text), "final answer is not JSON", "final answer does not match the output schema")
}

// ValidateArgs checks that args, a tool call's arguments, are JSON
// satisfying s, the tool's parameter schema.
func ValidateArgs(s *jsonschema.Schema, args []byte) error {
	_, err := validate(s, args, "arguments are not JSON", "arguments do not match the tool's parameter schema")
	return err
}

// validate is Validate and ValidateArgs; its errors begin with notJSON or
// mismatch. The text is read strictly (jsonv2.UnmarshalAny): a name given
// twice is refused, where the schema would see only one of the values.
func validate(s *jsonschema.Schema, text []byte, notJSON, mismatch string) (json.RawMessage, error) {
	doc, err := jsonv2.UnmarshalAny(text)
	var jerr *jsonv2.Error
	switch {
	case errors.As(err, &jerr) && jerr.Problem == jsonv2.Repeated:
		return nil, fmt.Errorf("%s: %w", mismatch, err) // JSON, but no schema can judge it
	case err != nil:
		return nil, fmt.Errorf("%s: %w", notJSON, err)
	}
	if err := s.Validate(doc); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			ptr, reason := summarize(verr)
			return nil, fmt.Errorf("%s: at %s: %s", mismatch, where(ptr), reason)
		}
		return nil, fmt.Errorf("%s: %s", mismatch, scrub(err.Error()))
	}
	return json.RawMessage(bytes.TrimSpace(text)), nil
}

// compileError turns the library's error into an *Error.
func compileError(err error) *Error {
	var meta *jsonschema.SchemaValidationError
	var load *jsonschema.LoadURLError
	var verr *jsonschema.ValidationError
	switch {
	case errors.As(err, &meta) && errors.As(meta.Err, &verr):
		// The schema is the instance the metaschema checked: the
		// instance location is the pointer inside the schema.
		ptr, reason := summarize(verr)
		return &Error{Pointer: ptr, Reason: reason}
	case errors.As(err, &load):
		return &Error{Reason: fmt.Sprintf("cannot load %q: only references inside the schema are allowed", scrub(load.URL))}
	}
	return &Error{Reason: scrub(err.Error())}
}

// maxReasons bounds how many reasons one message lists: a hostile schema
// could fail in thousands of places.
const maxReasons = 3

// summarize picks the first place the validation failed and what is wrong
// there; the intermediate "allOf failed" levels say nothing useful.
func summarize(e *jsonschema.ValidationError) (pointer, reason string) {
	var leaves []*jsonschema.ValidationError
	var collect func(*jsonschema.ValidationError)
	collect = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			collect(c)
		}
	}
	collect(e)
	if len(leaves) == 0 { // the library always has a leaf; be safe
		return "", "invalid"
	}
	pointer = jsonPointer(leaves[0].InstanceLocation)
	var reasons []string
	others := 0
	for _, l := range leaves {
		if jsonPointer(l.InstanceLocation) != pointer || len(reasons) == maxReasons {
			others++
			continue
		}
		reasons = append(reasons, scrub(kindText(l.ErrorKind)))
	}
	reason = strings.Join(reasons, "; ")
	switch {
	case others == 1:
		reason += " (and 1 more problem)"
	case others > 1:
		reason += fmt.Sprintf(" (and %d more problems)", others)
	}
	return pointer, reason
}

// kindText is what the library says of one failure, without its location.
// It goes through Error, which has the library's English printer, rather
// than importing golang.org/x/text for one.
func kindText(k jsonschema.ErrorKind) string {
	return strings.TrimPrefix((&jsonschema.ValidationError{ErrorKind: k}).Error(), "at '': ")
}

// jsonPointer renders tokens as an RFC 6901 pointer.
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// where names the root, whose pointer is empty, in a message.
func where(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

// scrub removes the compiler's name for the schema from a message, leaving
// the part the author wrote ("#/$defs/x", "other.json").
func scrub(s string) string {
	return strings.NewReplacer(base, "", baseDir, "").Replace(s)
}
