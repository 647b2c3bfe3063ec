// Package jsonv2 is the tree's one JSON layer over
// github.com/go-json-experiment/json (what becomes encoding/json/v2) and
// its tokenizer jsontext: the strict decoder for every input a model, a
// file, a peer or the store hands in (tool arguments, -models and -config
// files, stored payloads), the writer of what the runtime hands out, and
// the validity check of stored JSON.
//
// Unmarshal keeps the library's strict defaults (names match
// case-sensitively, a name given twice is refused, invalid UTF-8 is
// refused, nothing may follow the value) and adds two refusals: a member
// the Go type does not have, and a null, which would leave its field unset
// without saying so (into raw JSON, a json.RawMessage, null is kept as
// the value it is).
//
// It replaced hand-written readers, writers, a validity grammar and a
// second schema validator. Measured on the bench's SubactorParentRun (a
// parent run with one delegation, CPU profile of 40000 runs, 2 shared
// cores): the library paths take, of a run's CPU, 8.5% validating tool
// arguments (reading them into values and jsonschema's Validate, 19 of
// 105 allocations), 8.5% writing records, 6.3% checking stored JSON, 5.3%
// writing the delegate's answer and 2.6% reading its arguments. The
// hand-written code each replaced cost more than nothing, so none bought
// the 20% of an end-to-end goal that would have kept it.
package jsonv2

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Problem says what kind of fault an *Error is.
type Problem int

const (
	// Syntax: the input is not one JSON value (or not UTF-8).
	Syntax Problem = iota + 1
	// Repeated: an object gives a name twice.
	Repeated
	// Unknown: an object has a member the Go type does not (names are
	// case-sensitive, so a differently cased name is unknown too).
	Unknown
	// Null: a null where a value belongs.
	Null
	// Type: a JSON value of the wrong kind, or out of range, for its Go
	// type.
	Type
)

// Error is input Unmarshal refuses. Its message says what is wrong where,
// in words a model or an operator can act on.
type Error struct {
	Problem Problem
	// Pointer is the JSON pointer of the value at fault; for Repeated and
	// Unknown, of the object holding Name.
	Pointer jsontext.Pointer
	// Name is the member name at fault (Repeated, Unknown).
	Name string
	// Offset is the byte offset of a Syntax fault.
	Offset int64
	// Err is the library's error.
	Err error
}

func (e *Error) Error() string {
	switch e.Problem {
	case Repeated:
		return fmt.Sprintf("key %q is given twice %s: give each key once", e.Name, Where(e.Pointer))
	case Unknown:
		return fmt.Sprintf("unknown key %q %s (keys are case-sensitive)", e.Name, Where(e.Pointer))
	case Null:
		return fmt.Sprintf("null %s: give a value or leave the key out", Where(e.Pointer))
	case Type:
		var sem *json.SemanticError
		if errors.As(e.Err, &sem) && sem.GoType != nil && sem.JSONKind != 0 && sem.Err == nil {
			return fmt.Sprintf("a JSON %s %s, where %s belongs", kindName(sem.JSONKind), Where(e.Pointer), goKind(sem.GoType))
		}
		return fmt.Sprintf("wrong value %s: %v", Where(e.Pointer), e.Err)
	}
	return fmt.Sprintf("not valid JSON at byte %d: %v", e.Offset, unwrapSyntax(e.Err))
}

func (e *Error) Unwrap() error { return e.Err }

// Where names a place in a document by its JSON pointer.
func Where(p jsontext.Pointer) string {
	if p == "" {
		return "at the top level"
	}
	return "at " + string(p)
}

// errNull is the library's cause of a Null fault.
var errNull = errors.New("null")

var strict = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
		switch v.(type) {
		case *stdjson.RawMessage, *jsontext.Value:
			return errors.ErrUnsupported // raw JSON: its null is a value, for its reader to judge
		}
		if dec.PeekKind() == 'n' {
			return errNull
		}
		return errors.ErrUnsupported // decode as usual
	})),
)

// Unmarshal decodes data, exactly one JSON value, into v, which must be a
// non-nil pointer. Every fault in data is an *Error.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v, strict); err != nil {
		return classify(err)
	}
	return nil
}

// Member reads the member name of data, a JSON object, into v with
// Unmarshal's rules, ignoring the other members' names: a reader that
// must learn a document's version before it knows which names are
// allowed. found is false when the object has no such member. A name
// given twice, anywhere, and data that is not one JSON object are *Error.
func Member(data []byte, name string, v any) (found bool, err error) {
	var members map[string]jsontext.Value
	if err := json.Unmarshal(data, &members); err != nil {
		return false, classify(err)
	}
	if members == nil {
		return false, &Error{Problem: Null, Err: errNull}
	}
	raw, ok := members[name]
	if !ok {
		return false, nil
	}
	err = Unmarshal(raw, v)
	if e, ok := err.(*Error); ok {
		e.Pointer = jsontext.Pointer("").AppendToken(name) + e.Pointer // where it is in data
	}
	return true, err
}

// classify turns the library's error into an *Error; a fault of v itself
// (not a pointer, a type the library cannot decode into) stays as it is.
func classify(err error) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return &Error{Problem: Repeated, Pointer: syn.JSONPointer.Parent(), Name: syn.JSONPointer.LastToken(), Err: err}
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &sem):
		return &Error{Problem: Unknown, Pointer: sem.JSONPointer.Parent(), Name: sem.JSONPointer.LastToken(), Err: err}
	case errors.Is(err, errNull) && errors.As(err, &sem):
		return &Error{Problem: Null, Pointer: sem.JSONPointer, Err: err}
	case errors.As(err, &syn):
		return &Error{Problem: Syntax, Pointer: syn.JSONPointer, Offset: syn.ByteOffset, Err: err}
	case errors.As(err, &sem) && sem.JSONKind != 0:
		return &Error{Problem: Type, Pointer: sem.JSONPointer, Err: err}
	}
	return err
}

// unwrapSyntax is the library's reason for a syntax fault, without its
// own "jsontext: " prefix and location, which Error says in its words.
func unwrapSyntax(err error) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && syn.Err != nil {
		return syn.Err
	}
	return err
}

// kindName names a JSON value's kind.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return k.String() // null, string, number
}

// goKind says what JSON a Go type is read from.
func goKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// UnmarshalAny reads data, exactly one JSON value, as a JSON Schema
// validator takes it: objects as map[string]any, arrays as []any, numbers
// as float64 (a bound on an integer beyond 2^53 is judged to float64's
// precision; a tool's own Unmarshal reads the exact value), and strings,
// booleans and null as themselves. A name given twice in an object,
// invalid UTF-8 and anything after the value are *Error.
func UnmarshalAny(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, classify(err)
	}
	return v, nil
}

// lenient writes what encoding/json wrote of a string that is not UTF-8:
// each invalid byte becomes U+FFFD. Text from models and child processes
// is not always UTF-8, and writing it must not fail.
var lenient = jsontext.AllowInvalidUTF8(true)

// writing is how Marshal writes: the tree's types carry encoding/json's
// tags, so omitempty and nil slices and maps mean what they mean there;
// raw JSON it is given (a model's tool-call arguments, kept in the
// history as they came) may repeat a name, which readers refuse.
var writing = json.JoinOptions(
	lenient,
	jsontext.AllowDuplicateNames(true),
	jsonv1.OmitEmptyWithLegacySemantics(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
)

// Marshal writes v as compact JSON, invalid UTF-8 in its strings replaced
// by U+FFFD.
func Marshal(v any) ([]byte, error) {
	return json.Marshal(v, writing)
}

// AppendMarshal is Marshal appending to dst; on error dst is returned as
// it was. It allocates nothing of its own: v should be a pointer the
// caller already has on the heap (a boxed value is an allocation).
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	a := appenders.Get().(*appender)
	a.b = dst
	err := json.MarshalWrite(a, v, writing)
	out := a.b
	a.b = nil
	appenders.Put(a)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Own vouches for record data AppendMarshal wrote: valid JSON as
// ValidLoose judges it, by construction, so a store of this module copies
// it without checking it again (the memory store's CreateOwn and
// AppendOwnAt). Code outside the module cannot name it, so a record an
// embedder hands a store is always checked (K3).
type Own struct{}

// appender is the io.Writer MarshalWrite appends through; pooled, as one
// made per call would escape to the heap.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

var appenders = sync.Pool{New: func() any { return new(appender) }}

// AppendString appends s as a JSON string, invalid UTF-8 replaced by
// U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst, _ = jsontext.AppendQuote(dst, s) // its only error is invalid UTF-8, replaced
	return dst
}

// AppendCompact appends raw, which must be one JSON value, without its
// insignificant whitespace; it fails, leaving dst as it was, when raw is
// not JSON.
func AppendCompact(dst, raw []byte) ([]byte, error) {
	n := len(dst)
	buf := append(dst, raw...)
	v := jsontext.Value(buf[n:]) // Compact rewrites it in place, shorter
	if err := v.Compact(); err != nil {
		return dst, err
	}
	return buf[:n+len(v)], nil
}

// Valid reports whether data is one JSON value as Unmarshal reads it:
// UTF-8, no name given twice.
func Valid(data []byte) bool {
	return jsontext.Value(data).IsValid()
}

// ValidLoose reports whether data is one JSON value as encoding/json.Valid
// does: a name given twice and invalid UTF-8 inside strings are allowed.
// It is for JSON kept as it was given (a model's tool-call arguments in a
// session record), which readers judge when they read it.
func ValidLoose(data []byte) bool {
	return jsontext.Value(data).IsValid(lenient, jsontext.AllowDuplicateNames(true))
}
