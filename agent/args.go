package agent

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/jsontext"
)

// readArgs reads a tool call's arguments, compact JSON (sanitizeArgs), into
// what jsonschema.UnmarshalJSON (the schema package's reader) makes of
// them: map[string]any, []any, string, json.Number, bool and nil, a
// repeated key's last value winning. It leaves out the json.Decoder and
// its copies: strings without escapes are slices of s. ok is false for
// anything else than one compact JSON value nested at most maxArgsDepth
// deep; the caller then takes the schema package's way, which decides.
func readArgs(s string) (doc any, ok bool) {
	r := argsReader{s: s}
	v, ok := r.value(0)
	if !ok || r.i != len(s) {
		return nil, false
	}
	return v, true
}

// maxArgsDepth bounds the reader's recursion; deeper arguments are read
// the schema package's way.
const maxArgsDepth = 64

type argsReader struct {
	s string
	i int
}

func (r *argsReader) value(depth int) (any, bool) {
	if r.i >= len(r.s) || depth > maxArgsDepth {
		return nil, false
	}
	switch c := r.s[r.i]; {
	case c == '{':
		return r.object(depth)
	case c == '[':
		return r.array(depth)
	case c == '"':
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == 't':
		return true, r.literal("true")
	case c == 'f':
		return false, r.literal("false")
	case c == 'n':
		return nil, r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	}
	return nil, false
}

func (r *argsReader) literal(lit string) bool {
	if len(r.s)-r.i < len(lit) || r.s[r.i:r.i+len(lit)] != lit {
		return false
	}
	r.i += len(lit)
	return true
}

func (r *argsReader) object(depth int) (any, bool) {
	r.i++ // {
	m := make(map[string]any)
	if r.i < len(r.s) && r.s[r.i] == '}' {
		r.i++
		return m, true
	}
	for {
		if r.i >= len(r.s) || r.s[r.i] != '"' {
			return nil, false
		}
		key, ok := r.str()
		if !ok || r.i >= len(r.s) || r.s[r.i] != ':' {
			return nil, false
		}
		r.i++
		v, ok := r.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[key] = v
		if r.i >= len(r.s) {
			return nil, false
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (r *argsReader) array(depth int) (any, bool) {
	r.i++ // [
	a := make([]any, 0)
	if r.i < len(r.s) && r.s[r.i] == ']' {
		r.i++
		return a, true
	}
	for {
		v, ok := r.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if r.i >= len(r.s) {
			return nil, false
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// number reads a JSON number as its text, as a decoder with UseNumber does.
func (r *argsReader) number() (any, bool) {
	end := jsontext.NumberEnd(r.s, r.i)
	if end < 0 {
		return nil, false
	}
	n := json.Number(r.s[r.i:end])
	r.i = end
	return n, true
}

// str reads a JSON string at r.i, its opening quote.
func (r *argsReader) str() (string, bool) {
	end, plain, ok := jsontext.StringEnd(r.s, r.i)
	if !ok {
		return "", false
	}
	lit := r.s[r.i+1 : end-1]
	r.i = end
	if plain {
		return lit, true
	}
	return unquote(lit), true
}

// unquote is encoding/json's unquoting of the text of a string literal
// StringEnd took: the escapes resolved, a \u escape of a lone surrogate
// and every byte that is not UTF-8 replaced by U+FFFD.
func unquote(lit string) string {
	b := make([]byte, 0, len(lit)+2*utf8.UTFMax)
	for i := 0; i < len(lit); {
		var r rune
		r, i = jsontext.NextRune(lit, i)
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}
