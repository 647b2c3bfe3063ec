package jsontext

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestHex4(t *testing.T) {
	for s, want := range map[string]rune{
		"0000": 0, "00e9": 0xe9, "00E9": 0xe9, "D83D": 0xd83d, "ffff": 0xffff, "12345": 0x1234,
		"": -1, "123": -1, "12g4": -1, "-123": -1, " 123": -1,
	} {
		if got := Hex4(s); got != want {
			t.Errorf("Hex4(%q) = %#x, want %#x", s, got, want)
		}
	}
}

// StringEnd takes exactly the string literals encoding/json takes, and
// NextRune decodes them as it does.
func TestStringEndAndNextRuneAreJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	escapes := []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\uD83D\uDE00`, `\uD83D`, `\uDE00x`, `\u12`, `\x`, `\`, "\x01"}
	for i := range 20000 {
		lit := `"`
		for range r.IntN(6) {
			if r.IntN(2) == 0 {
				lit += escapes[r.IntN(len(escapes))]
			} else {
				lit += strings.ReplaceAll(randomText(r), `"`, "") // a quote ends the literal
			}
		}
		if r.IntN(8) > 0 {
			lit += `"`
		}
		// The literal is the shortest prefix of lit that encoding/json
		// takes as a string, if any.
		var want string
		wantEnd := -1
		for j := 2; j <= len(lit) && wantEnd < 0; j++ {
			if lit[j-1] == '"' && json.Unmarshal([]byte(lit[:j]), &want) == nil {
				wantEnd = j
			}
		}
		end, plain, ok := StringEnd(lit+" ", 0)
		if ok != (wantEnd > 0) || ok && end != wantEnd {
			t.Fatalf("case %d: StringEnd(%q) = %d, %v; encoding/json takes %d bytes", i, lit, end, ok, wantEnd)
		}
		if !ok {
			continue
		}
		text := lit[1 : end-1]
		got := []rune{}
		for j := 0; j < len(text); {
			var c rune
			c, j = NextRune(text, j)
			got = append(got, c)
		}
		if string(got) != want || plain && text != want {
			t.Fatalf("case %d: %q decodes to %q (plain %v), encoding/json to %q", i, lit, string(got), plain, want)
		}
	}
}
