package schema

import (
	"encoding/json"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/subactor/subactor/internal/jsontext"
)

// Fast validates against a schema written in a small subset of JSON
// Schema, the one tool parameter schemas use, without the general
// validator's allocations. It is compiled alongside the schema itself (see
// CompileFast) and answers, for every document, what the compiled schema's
// Validate answers, on values as jsonschema.UnmarshalJSON makes them:
// map[string]any, []any, string, json.Number, bool and nil. For any other
// value it answers false, so a caller that then asks the general validator
// never accepts what that one refuses.
//
// The subset: boolean schemas; type (a name or a list of names);
// properties, required, additionalProperties (a boolean or a schema);
// items (one schema), minItems, maxItems; minLength, maxLength (in runes);
// enum of strings; minimum, maximum, exclusiveMinimum, exclusiveMaximum;
// title, description, $comment, default, examples, deprecated, readOnly and
// writeOnly, which say nothing of validity; $schema at the root naming
// draft 2020-12 or draft-07. A schema with any other keyword has no Fast.
//
// A Fast is immutable and safe for concurrent use.
type Fast struct{ root *node }

// Valid reports whether v satisfies the schema.
func (f *Fast) Valid(v any) bool { return f.root.valid(v) }

// ValidJSON reports whether raw is JSON text whose value satisfies the
// schema: what Valid answers for the value jsonschema.UnmarshalJSON reads
// from raw, found by going over the text once, building no value and
// allocating nothing. It answers false for anything else than one JSON
// value with whitespace around it. It also answers false, where Valid may
// answer true, in three cases it leaves to the general validator, as a
// caller should after every false:
//   - a value nested more than 64 deep;
//   - an object whose schema requires more than 64 names;
//   - an object that gives a name twice, first with a value the schema
//     refuses: the reader keeps the last value, the only one Valid sees,
//     but ValidJSON checks each.
func (f *Fast) ValidJSON(raw []byte) bool {
	// raw is only read during the call, and no string cut from it is
	// kept: it can be viewed as a string, which the node's checks and
	// maps take without a copy.
	t := text{s: unsafe.String(unsafe.SliceData(raw), len(raw))}
	return t.value(f.root, 0) && t.end()
}

// node is one schema of the subset.
type node struct {
	never      bool  // the false schema
	types      types // none: any type
	props      map[string]*node
	required   []string
	closed     bool  // additionalProperties: false
	additional *node // additionalProperties as a schema
	items      *node
	minItems   int // -1: none, as for every bound below
	maxItems   int
	minLength  int
	maxLength  int
	enum       map[string]struct{} // nil: no enum
	minimum    *decimal
	maximum    *decimal
	exclMin    *decimal
	exclMax    *decimal

	// For ValidJSON: an object's properties and required names by name
	// (index), the bits of all the required ones, and whether there are
	// more than the 64 bits can tell.
	keys         map[string]key
	allRequired  uint64
	manyRequired bool
}

// key is what a node says of one name of an object.
type key struct {
	p   *node  // its property's schema; nil: none
	bit uint64 // its bit in allRequired; 0: not required
}

// anything is the schema of a value nothing constrains.
var anything = node{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}

// types is a set of JSON types, one bit each.
type types uint8

const (
	tNull types = 1 << iota
	tBoolean
	tNumber
	tInteger
	tString
	tArray
	tObject
)

var typeNames = map[string]types{
	"null": tNull, "boolean": tBoolean, "number": tNumber, "integer": tInteger,
	"string": tString, "array": tArray, "object": tObject,
}

// drafts are the $schema values whose dialect the subset means the same in.
var drafts = map[string]bool{
	"https://json-schema.org/draft/2020-12/schema":  true,
	"https://json-schema.org/draft/2020-12/schema#": true,
	"http://json-schema.org/draft-07/schema":        true,
	"http://json-schema.org/draft-07/schema#":       true,
}

// annotations are the keywords that do not take part in validation.
var annotations = map[string]bool{
	"title": true, "description": true, "$comment": true, "default": true,
	"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// compileFast compiles doc, a schema as jsonschema.UnmarshalJSON reads it
// that has compiled, into a Fast; nil when it leaves the subset.
func compileFast(doc any) *Fast {
	if obj, ok := doc.(map[string]any); ok {
		if d, ok := obj["$schema"]; ok {
			if s, ok := d.(string); !ok || !drafts[s] {
				return nil
			}
		}
	}
	n, ok := compileNode(doc, true)
	if !ok {
		return nil
	}
	return &Fast{root: n}
}

func compileNode(doc any, root bool) (*node, bool) {
	if b, ok := doc.(bool); ok {
		return &node{never: !b, minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}, true
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	n := &node{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	for k, v := range obj {
		ok := true
		switch k {
		case "type":
			n.types, ok = compileTypes(v)
		case "properties":
			var props map[string]any
			if props, ok = v.(map[string]any); ok {
				n.props = make(map[string]*node, len(props))
				for name, p := range props {
					if n.props[name], ok = compileNode(p, false); !ok {
						break
					}
				}
			}
		case "required":
			var list []any
			if list, ok = v.([]any); ok {
				n.required = make([]string, len(list))
				for i, r := range list {
					if n.required[i], ok = r.(string); !ok {
						break
					}
				}
			}
		case "additionalProperties":
			if b, isBool := v.(bool); isBool {
				n.closed = !b
			} else {
				n.additional, ok = compileNode(v, false)
			}
		case "items":
			n.items, ok = compileNode(v, false)
		case "minItems":
			n.minItems, ok = count(v)
		case "maxItems":
			n.maxItems, ok = count(v)
		case "minLength":
			n.minLength, ok = count(v)
		case "maxLength":
			n.maxLength, ok = count(v)
		case "enum":
			var list []any
			if list, ok = v.([]any); ok {
				n.enum = make(map[string]struct{}, len(list))
				for _, e := range list {
					var s string
					if s, ok = e.(string); !ok {
						break
					}
					n.enum[s] = struct{}{}
				}
			}
		case "minimum":
			n.minimum, ok = bound(v)
		case "maximum":
			n.maximum, ok = bound(v)
		case "exclusiveMinimum":
			n.exclMin, ok = bound(v)
		case "exclusiveMaximum":
			n.exclMax, ok = bound(v)
		case "$schema":
			ok = root // checked by compileFast
		default:
			ok = annotations[k]
		}
		if !ok {
			return nil, false
		}
	}
	n.index()
	return n, true
}

// index makes n.keys and the required bits from props and required.
func (n *node) index() {
	if len(n.props) == 0 && len(n.required) == 0 {
		return
	}
	n.keys = make(map[string]key, len(n.props)+len(n.required))
	for name, p := range n.props {
		n.keys[name] = key{p: p}
	}
	for _, r := range n.required {
		k := n.keys[r]
		switch {
		case k.bit != 0: // named twice
		case n.allRequired == ^uint64(0):
			n.manyRequired = true
		default:
			k.bit = 1 << bits.OnesCount64(n.allRequired)
			n.allRequired |= k.bit
			n.keys[r] = k
		}
	}
}

func compileTypes(v any) (types, bool) {
	if s, ok := v.(string); ok {
		t, ok := typeNames[s]
		return t, ok
	}
	list, ok := v.([]any)
	if !ok {
		return 0, false
	}
	var t types
	for _, e := range list {
		s, _ := e.(string)
		one, ok := typeNames[s]
		if !ok {
			return 0, false
		}
		t |= one
	}
	return t, true
}

// count reads a non-negative integer keyword written as digits (the
// library also takes 2.0 or 1e2; those leave the subset).
func count(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	return int(i), err == nil && i >= 0
}

// bound reads a numeric bound the library can read too.
func bound(v any) (*decimal, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	d, ok := parseDecimal(string(n))
	if !ok || !d.rat {
		return nil, false
	}
	return &d, true
}

func (n *node) valid(v any) bool {
	if n.never {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		return n.is(tObject) && n.enum == nil && n.object(v)
	case []any:
		return n.is(tArray) && n.enum == nil && n.array(v)
	case string:
		return n.is(tString) && n.str(v)
	case json.Number:
		return n.enum == nil && n.number(v)
	case bool:
		return n.is(tBoolean) && n.enum == nil
	case nil:
		return n.is(tNull) && n.enum == nil
	}
	return false
}

// is reports whether the node's type allows t (numbers aside).
func (n *node) is(t types) bool { return n.types == 0 || n.types&t != 0 }

func (n *node) object(obj map[string]any) bool {
	for _, r := range n.required {
		if _, ok := obj[r]; !ok {
			return false
		}
	}
	for k, v := range obj {
		p, ok := n.props[k]
		switch {
		case ok:
			if !p.valid(v) {
				return false
			}
		case n.closed:
			return false
		case n.additional != nil:
			if !n.additional.valid(v) {
				return false
			}
		}
	}
	return true
}

func (n *node) array(a []any) bool {
	if n.minItems >= 0 && len(a) < n.minItems || n.maxItems >= 0 && len(a) > n.maxItems {
		return false
	}
	if n.items != nil {
		for _, v := range a {
			if !n.items.valid(v) {
				return false
			}
		}
	}
	return true
}

func (n *node) str(s string) bool {
	// A rune takes one to utf8.UTFMax bytes: most strings need no count.
	if n.maxLength >= 0 && len(s) > n.maxLength || n.minLength >= 0 && len(s) < n.minLength*utf8.UTFMax {
		c := utf8.RuneCountInString(s)
		if n.maxLength >= 0 && c > n.maxLength || n.minLength >= 0 && c < n.minLength {
			return false
		}
	}
	if n.enum != nil {
		_, ok := n.enum[s]
		return ok
	}
	return true
}

func (n *node) number(num json.Number) bool {
	if n.types == 0 && n.minimum == nil && n.maximum == nil && n.exclMin == nil && n.exclMax == nil {
		return true
	}
	d, ok := parseDecimal(string(num))
	if !ok {
		return false // not a number: the library decides
	}
	if n.types != 0 && n.types&tNumber == 0 && !(n.types&tInteger != 0 && d.rat && d.integer()) {
		return false
	}
	if n.minimum == nil && n.maximum == nil && n.exclMin == nil && n.exclMax == nil {
		return true
	}
	if !d.rat {
		// The library cannot read it and panics comparing it (callTool
		// recovers): the caller's fallback fails as it always did.
		return false
	}
	return (n.minimum == nil || d.cmp(n.minimum) >= 0) &&
		(n.maximum == nil || d.cmp(n.maximum) <= 0) &&
		(n.exclMin == nil || d.cmp(n.exclMin) > 0) &&
		(n.exclMax == nil || d.cmp(n.exclMax) < 0)
}

// decimal is a JSON number, read without allocating: its value is
// 0.ddd × 10^exp, the digits ddd being hi followed by lo with no leading
// or trailing zero (none for zero).
type decimal struct {
	neg    bool
	hi, lo string
	exp    int64
	// rat says whether big.Rat.SetString, which the library reads numbers
	// with, takes the text: it refuses an exponent beyond int64 and, for
	// a number other than zero, a scale beyond ±1e6.
	rat bool
}

// parseDecimal reads s, which must be a JSON number.
func parseDecimal(s string) (d decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if len(intPart) == 0 || len(intPart) > 1 && intPart[0] == '0' {
		return d, false
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if frac = s[start:i]; len(frac) == 0 {
			return d, false
		}
	}
	var exp int64
	expOK := true
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start = i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		digits := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == digits {
			return d, false
		}
		var err error
		exp, err = strconv.ParseInt(s[start:i], 10, 64)
		expOK = err == nil
	}
	if i != len(s) {
		return d, false
	}
	// Trim the zeros off both ends of intPart+frac.
	hi, lo := intPart, frac
	for len(hi) > 0 && hi[0] == '0' {
		hi = hi[1:]
	}
	lead := len(intPart) - len(hi) // zeros before the first digit of hi
	if len(hi) == 0 {
		for len(lo) > 0 && lo[0] == '0' {
			lo = lo[1:]
		}
		lead = len(intPart) + len(frac) - len(lo)
	}
	for len(lo) > 0 && lo[len(lo)-1] == '0' {
		lo = lo[:len(lo)-1]
	}
	if len(lo) == 0 {
		for len(hi) > 0 && hi[len(hi)-1] == '0' {
			hi = hi[:len(hi)-1]
		}
	}
	d.hi, d.lo = hi, lo
	if d.zero() {
		d.neg, d.rat = false, expOK
		return d, true
	}
	// The library's scale: exp less the count of fraction digits.
	scale, ok := sub(exp, int64(len(frac)))
	d.rat = expOK && ok && -1e6 <= scale && scale <= 1e6
	if d.rat { // exp is small then; otherwise d is neither compared nor an integer
		d.exp = exp + int64(len(intPart)-lead)
	}
	return d, true
}

// sub is a-b and whether it did not overflow.
func sub(a, b int64) (int64, bool) {
	c := a - b
	return c, (c < a) == (b > 0)
}

func (d *decimal) zero() bool { return len(d.hi) == 0 && len(d.lo) == 0 }

// integer reports whether d has no fractional part.
func (d *decimal) integer() bool {
	return d.zero() || d.exp >= int64(len(d.hi)+len(d.lo))
}

// digit is the i-th significant digit, '0' past the last.
func (d *decimal) digit(i int) byte {
	switch {
	case i < len(d.hi):
		return d.hi[i]
	case i-len(d.hi) < len(d.lo):
		return d.lo[i-len(d.hi)]
	}
	return '0'
}

// cmp compares d and e as -1, 0 or +1.
func (d *decimal) cmp(e *decimal) int {
	sign := func(x *decimal) int {
		switch {
		case x.zero():
			return 0
		case x.neg:
			return -1
		}
		return 1
	}
	sd, se := sign(d), sign(e)
	if sd != se || sd == 0 {
		return cmpInt(int64(sd), int64(se))
	}
	// Same sign, neither zero: compare magnitudes, then flip for negatives.
	m := cmpInt(d.exp, e.exp)
	if m == 0 {
		n := max(len(d.hi)+len(d.lo), len(e.hi)+len(e.lo))
		for i := 0; i < n && m == 0; i++ {
			m = cmpInt(int64(d.digit(i)), int64(e.digit(i)))
		}
	}
	return m * sd
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxDepth bounds how deep ValidJSON follows a value (readArgs in the
// agent package stops at the same depth): deeper ones, which tool
// arguments never are, go the general validator's way.
const maxDepth = 64

// text is JSON text ValidJSON reads, and how far.
type text struct {
	s string
	i int
}

// ws skips whitespace.
func (t *text) ws() {
	for t.i < len(t.s) {
		switch t.s[t.i] {
		case ' ', '\t', '\n', '\r':
			t.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (t *text) end() bool {
	t.ws()
	return t.i == len(t.s)
}

// value reads the value at t.i, after whitespace, and reports whether it
// is JSON that n allows. Once it knows the answer is no, it stops reading:
// that is the answer whether the rest is JSON or not.
func (t *text) value(n *node, depth int) bool {
	t.ws()
	if n.never || depth > maxDepth || t.i >= len(t.s) {
		return false
	}
	switch c := t.s[t.i]; {
	case c == '{':
		return n.is(tObject) && n.enum == nil && t.object(n, depth)
	case c == '[':
		return n.is(tArray) && n.enum == nil && t.array(n, depth)
	case c == '"':
		lit, plain, ok := t.str()
		return ok && n.is(tString) && (plain && n.str(lit) || !plain && n.escaped(lit))
	case c == 't':
		return t.literal("true") && n.is(tBoolean) && n.enum == nil
	case c == 'f':
		return t.literal("false") && n.is(tBoolean) && n.enum == nil
	case c == 'n':
		return t.literal("null") && n.is(tNull) && n.enum == nil
	case c == '-' || '0' <= c && c <= '9':
		num, ok := t.number()
		return ok && n.enum == nil && n.number(json.Number(num))
	}
	return false
}

func (t *text) literal(lit string) bool {
	if len(t.s)-t.i < len(lit) || t.s[t.i:t.i+len(lit)] != lit {
		return false
	}
	t.i += len(lit)
	return true
}

// object reads the object at t.i, its opening brace. A name n has no
// property for takes additionalProperties' schema; a name given twice has
// both its values checked (see ValidJSON).
func (t *text) object(n *node, depth int) bool {
	if n.manyRequired {
		return false
	}
	t.i++ // {
	t.ws()
	if t.i < len(t.s) && t.s[t.i] == '}' {
		t.i++
		return n.allRequired == 0
	}
	var seen uint64 // the required names' bits
	for {
		if t.i >= len(t.s) || t.s[t.i] != '"' {
			return false
		}
		name, plain, ok := t.str()
		if !ok {
			return false
		}
		t.ws()
		if t.i >= len(t.s) || t.s[t.i] != ':' {
			return false
		}
		t.i++
		k := n.lookup(name, plain)
		seen |= k.bit
		p := k.p
		if p == nil {
			switch {
			case n.closed:
				return false
			case n.additional != nil:
				p = n.additional
			default:
				p = &anything
			}
		}
		if !t.value(p, depth+1) {
			return false
		}
		t.ws()
		if t.i >= len(t.s) {
			return false
		}
		switch t.s[t.i] {
		case ',':
			t.i++
			t.ws()
		case '}':
			t.i++
			return seen == n.allRequired
		default:
			return false
		}
	}
}

// lookup is what n says of the name whose literal's text is lit.
func (n *node) lookup(lit string, plain bool) key {
	if plain {
		return n.keys[lit]
	}
	for name, k := range n.keys {
		if decodes(lit, name) {
			return k
		}
	}
	return key{}
}

// array reads the array at t.i, its opening bracket.
func (t *text) array(n *node, depth int) bool {
	t.i++ // [
	items := n.items
	if items == nil {
		items = &anything
	}
	t.ws()
	if t.i < len(t.s) && t.s[t.i] == ']' {
		t.i++
		return n.minItems <= 0
	}
	for count := 1; ; count++ {
		if n.maxItems >= 0 && count > n.maxItems || !t.value(items, depth+1) {
			return false
		}
		t.ws()
		if t.i >= len(t.s) {
			return false
		}
		switch t.s[t.i] {
		case ',':
			t.i++
		case ']':
			t.i++
			return n.minItems < 0 || count >= n.minItems
		default:
			return false
		}
	}
}

// number reads the number at t.i and returns its text.
func (t *text) number() (string, bool) {
	end := jsontext.NumberEnd(t.s, t.i)
	if end < 0 {
		return "", false
	}
	num := t.s[t.i:end]
	t.i = end
	return num, true
}

// str reads the string literal at t.i, its opening quote, and returns its
// text between the quotes; plain as jsontext.StringEnd says.
func (t *text) str() (lit string, plain, ok bool) {
	end, plain, ok := jsontext.StringEnd(t.s, t.i)
	if !ok {
		return "", false, false
	}
	lit, t.i = t.s[t.i+1:end-1], end
	return lit, plain, true
}

// escaped is str for a string whose literal's text lit is not plain.
func (n *node) escaped(lit string) bool {
	if n.minLength < 0 && n.maxLength < 0 && n.enum == nil {
		return true
	}
	c := 0
	for i := 0; i < len(lit); c++ {
		_, i = jsontext.NextRune(lit, i)
	}
	if n.maxLength >= 0 && c > n.maxLength || n.minLength >= 0 && c < n.minLength {
		return false
	}
	if n.enum == nil {
		return true
	}
	for e := range n.enum {
		if decodes(lit, e) {
			return true
		}
	}
	return false
}

// decodes reports whether the string literal's text lit is s.
func decodes(lit, s string) bool {
	var b [utf8.UTFMax]byte
	j := 0
	for i := 0; i < len(lit); {
		var r rune
		r, i = jsontext.NextRune(lit, i)
		w := utf8.EncodeRune(b[:], r)
		if len(s)-j < w || s[j:j+w] != string(b[:w]) {
			return false
		}
		j += w
	}
	return j == len(s)
}
