package jsontext

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
