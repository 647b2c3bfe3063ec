package jsontext

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// stringPieces are the parts random strings are made of: each byte class
// AppendString treats apart, and runes around them.
var stringPieces = []string{
	"a", "hi", " ", "\"", "\\", "/", "<", ">", "&", "\b", "\f", "\n", "\r", "\t",
	"\x00", "\x1f", "\x7f", "é", "日本", "\u2028", "\u2029", "\u2027", "\U0001F600",
	"\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "{}", "[1, 2]", `{"a": "<b>"}`,
}

func randomText(r *rand.Rand) string {
	var b []byte
	for range r.IntN(8) {
		b = append(b, stringPieces[r.IntN(len(stringPieces))]...)
	}
	return string(b)
}

func TestAppendStringIsJSONMarshals(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		s := randomText(r)
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("case %d: AppendString(%q) = %s, json.Marshal %s", i, s, got, want)
		}
	}
}

func TestAppendRawIsJSONMarshals(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(raw json.RawMessage) {
		t.Helper()
		want, err := json.Marshal(raw)
		got, ok := AppendRaw(nil, raw)
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("AppendRaw(%q) = %s, %v; json.Marshal %s, %v", raw, got, ok, want, err)
		}
	}
	check(nil)
	for range 20000 {
		raw := json.RawMessage(randomText(r))
		if r.IntN(2) == 0 { // mostly JSON: a string or an object holding one
			s, _ := json.Marshal(randomText(r))
			raw = append(append([]byte(` {"k" : `), s...), " ,\n\"n\": [1, true] }"...)
		}
		check(raw)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range stringPieces {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", s, got, want)
		}
		want, err := json.Marshal(json.RawMessage(s))
		if got, ok := AppendRaw(nil, json.RawMessage(s)); ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("AppendRaw(%q) = %s, %v; json.Marshal %s, %v", s, got, ok, want, err)
		}
	})
}
