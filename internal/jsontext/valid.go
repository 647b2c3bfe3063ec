// Package jsontext reads and writes JSON text as encoding/json does, byte
// for byte, without its reflection and allocations: the records the agent
// loop writes on every turn, and what the tools answer.
//
// Valid gives exactly encoding/json.Valid's verdict several times faster:
// encoding/json's scanner calls a function pointer for every byte; Valid
// here is one loop over the input that keeps the open containers on a
// bit stack, so it neither recurses nor allocates (below 256 levels of
// nesting).
package jsontext

// maxDepth is encoding/json's maxNestingDepth: it rejects documents with
// more containers open at once.
const maxDepth = 10000

// stop marks the bytes that end the fast run of a string's contents: the
// quote, the backslash, and the control characters JSON forbids there.
// Every other byte, including invalid UTF-8, is accepted, as
// encoding/json accepts it.
var stop = [256]bool{'"': true, '\\': true}

func init() {
	for c := range 0x20 {
		stop[c] = true
	}
}

// Valid reports whether data is a valid JSON encoding, as
// encoding/json.Valid does: the same grammar, the same four whitespace
// bytes, invalid UTF-8 accepted inside strings, and no more than 10000
// nested arrays and objects.
func Valid(data []byte) bool {
	// Bit d-1 of the stack is set when the container at depth d is an
	// object and clear when it is an array. Four words cover 256 levels
	// on the goroutine's stack; deeper input grows the slice.
	var small [4]uint64
	stack := small[:]
	depth := 0

	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if depth == maxDepth {
				return false
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			if w == len(stack) {
				stack = append(stack, 0)
			}
			depth++
			i = skipSpace(data, i+1)
			if c == '[' {
				stack[w] &^= bit
				if i < len(data) && data[i] == ']' {
					i++
					depth--
					break // the empty array is the value
				}
				continue // the first element
			}
			stack[w] |= bit
			if i < len(data) && data[i] == '}' {
				i++
				depth--
				break // the empty object is the value
			}
			if i = member(data, i); i < 0 {
				return false
			}
			continue // the first member's value
		case c == '"':
			if i = str(data, i+1); i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = NumberEnd(data, i); i < 0 {
				return false
			}
		case c == 't':
			if !lit(data, i, "true") {
				return false
			}
			i += len("true")
		case c == 'f':
			if !lit(data, i, "false") {
				return false
			}
			i += len("false")
		case c == 'n':
			if !lit(data, i, "null") {
				return false
			}
			i += len("null")
		default:
			return false
		}

		// A value ended before i: close the containers it completes, up
		// to the next comma, which is followed by another value.
		for {
			i = skipSpace(data, i)
			if depth == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			d := depth - 1
			object := stack[d>>6]&(1<<(d&63)) != 0
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if object {
					if i = member(data, i); i < 0 {
						return false
					}
				}
				break
			}
			if object && c != '}' || !object && c != ']' {
				return false
			}
			i++
			depth--
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for ; i < len(data); i++ {
		// Most bytes after structure are not space: one comparison
		// settles them.
		if c := data[i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
	}
	return i
}

// member reads an object member's key and colon starting at i, and
// returns the index of its value (after any space), or -1.
func member(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = str(data, i+1); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

// str reads a string's contents after the opening quote at i-1 and
// returns the index after the closing quote, or -1.
func str(data []byte, i int) int {
	for {
		// Skip the plain bytes, which are nearly all of them.
		for i < len(data) && !stop[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Four hex digits; encoding/json does not check that
				// surrogates pair up, and nor does this.
				if i+6 > len(data) || !hex(data[i+2]) || !hex(data[i+3]) || !hex(data[i+4]) || !hex(data[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

func hex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// NumberEnd reads the JSON number starting at data[i] and returns the
// index after it, or -1: an optional minus, then 0 or a digit string not
// starting with 0, then optionally a fraction of one or more digits, then
// optionally an exponent of one or more digits with an optional sign.
// What follows is the caller's to check, so "01" fails there, at the 1.
func NumberEnd[T string | []byte](data T, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = digits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		if i++; i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		i = digits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		if i++; i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		i = digits(data, i+1)
	}
	return i
}

// digits returns the index of the first non-digit at or after i.
func digits[T string | []byte](data T, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lit reports whether the literal word starts at i.
func lit(data []byte, i int, word string) bool {
	return len(data)-i >= len(word) && string(data[i:i+len(word)]) == word
}
