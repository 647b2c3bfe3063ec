package main

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// clean makes text from a child or an endpoint (titles, plans, answers,
// stop details, stderr tails, error bodies) safe to print on a terminal:
// escape sequences are removed whole (CSI such as clear-screen and cursor
// moves, OSC such as clipboard writes and window titles, DCS and the other
// control strings, two-byte escapes such as a full reset), "\r\n" becomes
// "\n", any other control character but newline and tab becomes a space,
// and bytes that are not UTF-8 become U+FFFD. C1 controls (U+0080 to
// U+009F) count as the escapes they stand for. A control string without
// its terminator loses only its introducer: what follows stays readable,
// and without the ESC no terminal acts on it. -json output keeps the text
// as it came, escaped (see jsonControls).
func clean(s string) string {
	if !needsCleaning(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' || r == '\t':
			b.WriteByte(byte(r))
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// A CRLF line end: the newline follows.
		case r == esc || isC1(r):
			i += escapeLen(s[i:], r, size)
			continue
		case r < ' ' || r == 0x7f:
			b.WriteByte(' ')
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

const esc = 0x1b

func isC1(r rune) bool { return r >= 0x80 && r < 0xa0 }

// needsCleaning says whether clean would change s: the common case, plain
// text, is returned as it is.
func needsCleaning(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			if c < ' ' && c != '\n' && c != '\t' || c == 0x7f {
				return true
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if isC1(r) || r == utf8.RuneError && size == 1 {
			return true
		}
		i += size - 1
	}
	return false
}

// C1 controls that open a sequence (ESC followed by the C1 code minus 0x40
// opens the same one).
const (
	c1DCS = 0x90
	c1SOS = 0x98
	c1CSI = 0x9b
	c1ST  = 0x9c
	c1OSC = 0x9d
	c1PM  = 0x9e
	c1APC = 0x9f
)

// escapeLen is the length of the escape sequence at the start of s, which
// starts with ESC or the C1 control r of size bytes; at least that first
// character.
func escapeLen(s string, r rune, size int) int {
	c1, n := r, size
	if r == esc {
		switch {
		case len(s) < 2:
			return 1
		case s[1] >= 0x40 && s[1] <= 0x5f:
			// ESC Fe: the 7-bit form of a C1 control.
			c1, n = rune(s[1])+0x40, 2
		case s[1] >= 0x20 && s[1] <= 0x2f:
			// ESC, intermediate bytes, a final byte (character set
			// designations and the like).
			n = 2
			for n < len(s) && s[n] >= 0x20 && s[n] <= 0x2f {
				n++
			}
			if n < len(s) && s[n] >= 0x30 && s[n] <= 0x7e {
				n++
			}
			return n
		case s[1] >= 0x30 && s[1] <= 0x7e:
			// ESC Fp or Fs: cursor save, keypad modes, a full reset.
			return 2
		default:
			return 1
		}
	}
	switch c1 {
	case c1CSI:
		// Parameter and intermediate bytes, then a final byte; a
		// sequence broken by anything else ends there.
		for n < len(s) && s[n] >= 0x20 && s[n] <= 0x3f {
			n++
		}
		if n < len(s) && s[n] >= 0x40 && s[n] <= 0x7e {
			n++
		}
	case c1OSC, c1DCS, c1SOS, c1PM, c1APC:
		if end := stringEnd(s[n:]); end >= 0 {
			n += end
		}
	}
	return n
}

// stringEnd is the length of a control string's body and terminator (BEL,
// ESC \ or ST) at the start of s, or -1 when s has no terminator.
func stringEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == esc && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == c1ST:
			return i + 2
		}
	}
	return -1
}

// jsonControls writes JSON text with DEL and the C1 controls escaped as
// \u007f and \u0080 to \u009f: JSON escapes only U+0000 to U+001F, and a
// terminal that shows the -json stream acts on a raw C1 CSI or OSC as it
// does on ESC. Those characters only occur inside JSON strings, where the
// escape stands for the same character, so the value decodes unchanged.
// Every Write must hold whole JSON values, as an Encoder's do.
type jsonControls struct{ w io.Writer }

func (j jsonControls) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, 0x7f) < 0 && bytes.IndexByte(p, 0xc2) < 0 {
		return j.w.Write(p)
	}
	out := make([]byte, 0, len(p)+32)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == 0x7f:
			out = append(out, `\u007f`...)
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] < 0xa0:
			// U+0080 to U+009F, two bytes in UTF-8.
			const hex = "0123456789abcdef"
			out = append(out, '\\', 'u', '0', '0', hex[p[i+1]>>4], hex[p[i+1]&0xf])
			i++
		default:
			out = append(out, c)
		}
	}
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
