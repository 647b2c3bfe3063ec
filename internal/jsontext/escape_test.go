package jsontext

import "testing"

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
