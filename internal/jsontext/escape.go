package jsontext

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Hex4 is the value of the four hex digits s starts with (a \u escape's
// code unit), or -1 when s is shorter or they are not all hex digits.
func Hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// StringEnd reads the string literal whose opening quote is s[i] and
// returns the index after its closing quote; ok is false for a literal
// JSON refuses (unterminated, a control character, an unknown escape, a
// \u without four hex digits). plain says its text, s[i+1:end-1], is the
// string itself: no escape, and valid UTF-8. Otherwise NextRune decodes
// it.
func StringEnd(s string, i int) (end int, plain, ok bool) {
	plain = true
	ascii := true
	start := i + 1
	for i = start; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if plain && !ascii {
				plain = utf8.ValidString(s[start:i])
			}
			return i + 1, plain, true
		case c == '\\':
			plain = false
			if i++; i >= len(s) {
				return 0, false, false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if Hex4(s[i+1:]) < 0 {
					return 0, false, false
				}
				i += 4
			default:
				return 0, false, false
			}
		case c < ' ':
			return 0, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, false, false
}

// NextRune decodes the rune at lit[i], lit being the text of a string
// literal StringEnd took, as encoding/json does: a \u escape of a
// surrogate that does not pair with the next one, and every byte that is
// not UTF-8, become U+FFFD. It returns the rune and the index after it.
func NextRune(lit string, i int) (rune, int) {
	c := lit[i]
	if c >= utf8.RuneSelf {
		r, size := utf8.DecodeRuneInString(lit[i:])
		return r, i + size
	}
	if c != '\\' {
		return rune(c), i + 1
	}
	switch lit[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := Hex4(lit[i+2:])
		i += 6
		if !utf16.IsSurrogate(r) {
			return r, i
		}
		if len(lit)-i >= 6 && lit[i] == '\\' && lit[i+1] == 'u' {
			if pair := utf16.DecodeRune(r, Hex4(lit[i+2:])); pair != utf8.RuneError {
				return pair, i + 6
			}
		}
		return utf8.RuneError, i
	}
	return rune(lit[i+1]), i + 2 // the escaped ", \ or /
}
