package jsontext

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// cases are tricky inputs; each test checks the verdict equals json.Valid's,
// and want records the verdict expected of both, so a change in
// encoding/json shows up too.
var cases = []struct {
	in   string
	want bool
}{
	// Empty input and whitespace.
	{"", false},
	{" ", false},
	{" \t\r\n1 \t\r\n", true},
	{"\f1", false},
	{"1\v", false},
	{"\u00a01", false},
	{"\ufeff1", false},
	{"1\x00", false},
	{"\x001", false},

	// Literals.
	{"true", true},
	{"false", true},
	{"null", true},
	{"tru", false},
	{"nul", false},
	{"nulll", false},
	{"True", false},
	{"truefalse", false},
	{"true false", false},
	{"nan", false},
	{"NaN", false},
	{"Infinity", false},

	// Numbers.
	{"0", true},
	{"-0", true},
	{"-0.0e-0", true},
	{"1", true},
	{"123456789012345678901234567890", true},
	{"1.5", true},
	{"1e5", true},
	{"1E+5", true},
	{"1e-5", true},
	{"1.25E-05", true},
	{"01", false},
	{"-01", false},
	{"00", false},
	{"+1", false},
	{"-", false},
	{"--1", false},
	{".5", false},
	{"1.", false},
	{"1.e5", false},
	{"1e", false},
	{"1e+", false},
	{"1e+-5", false},
	{"1.5.5", false},
	{"1ee5", false},
	{"0x10", false},
	{"1 2", false},
	{"-a", false},
	{"[-]", false},
	{"[1.]", false},
	{"[01]", false},
	{"[0,1]", true},
	{"[1e5,2E-3]", true},

	// Strings.
	{`""`, true},
	{`"a"`, true},
	{`"`, false},
	{`"abc`, false},
	{`'a'`, false},
	{`"\"\\\/\b\f\n\r\t"`, true},
	{`"\u0000\uFFFF\uabcd\uD800"`, true},
	{`"\uDC00\uD800"`, true},
	{`"\u12"`, false},
	{`"\u12g4"`, false},
	{`"\U1234"`, false},
	{`"\x41"`, false},
	{`"\a"`, false},
	{`"\'"`, false},
	{`"\0"`, false},
	{`"\`, false},
	{`"\"`, false},
	{`"\\"`, true},
	{`"\u"`, false},
	{`"\u123`, false},
	{"\"a\x00\"", false},
	{"\"a\x1f\"", false},
	{"\"a\t\"", false},
	{"\"a\n\"", false},
	{"\"a\x7f\"", true},
	{"\"é€😀\"", true},
	{"\"\u2028\u2029\"", true},
	// encoding/json accepts invalid UTF-8 inside strings.
	{"\"\xff\"", true},
	{"\"\xc3\"", true},
	{"\"\xed\xa0\x80\"", true},
	{"\"\x80\x80\"", true},
	{"\xff", false},
	{"[\xff]", false},
	{"\"a\"\xff", false},

	// Arrays.
	{"[]", true},
	{"[ ]", true},
	{" [ 1 , 2 ] ", true},
	{"[", false},
	{"]", false},
	{"[1", false},
	{"[1,", false},
	{"[1,]", false},
	{"[,1]", false},
	{"[,]", false},
	{"[1 2]", false},
	{"[1,,2]", false},
	{"[1}", false},
	{"[[]]", true},
	{"[[],[[]],{}]", true},
	{"[]]", false},
	{"[][]", false},

	// Objects.
	{"{}", true},
	{"{ }", true},
	{`{"a":1}`, true},
	{` { "a" : 1 , "b" : [ ] } `, true},
	{`{"a":1,"a":2}`, true},
	{"{", false},
	{"}", false},
	{`{"a"}`, false},
	{`{"a":}`, false},
	{`{"a" 1}`, false},
	{`{"a":1,}`, false},
	{`{,"a":1}`, false},
	{`{"a":1 "b":2}`, false},
	{`{a:1}`, false},
	{`{1:1}`, false},
	{`{null:1}`, false},
	{`{"a":1]`, false},
	{`{"a":{"b":{}}}`, true},
	{`{"a":[{"b":[]}]}`, true},
	{`{"a":1}}`, false},
	{`{"a":1}{}`, false},
	{`{"a"::1}`, false},
	{`{"a":1:2}`, false},
	{`[{"a":1},{"b":2}]`, true},
	{`[{"a":1],{"b":2}]`, false},
	{`{"a":[1}`, false},

	// Nesting up to encoding/json's limit of 10000 and past it.
	{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), true},
	{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false},
	{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), true},
	{strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001), false},
	{strings.Repeat(`[{"a":`, 5000) + "[]" + strings.Repeat("}]", 5000), false},
	{strings.Repeat(`[{"a":`, 4999) + "[]" + strings.Repeat("}]", 4999), true},
	{strings.Repeat("[", 10001), false},
	{strings.Repeat("[", 300) + strings.Repeat("]", 300), true},
	{strings.Repeat("[", 300) + strings.Repeat("]", 299) + "}", false},
	{strings.Repeat(`[{"a":`, 100) + "1" + strings.Repeat("]}", 100), false},
}

func TestValidCases(t *testing.T) {
	for _, c := range cases {
		name := c.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		if std := json.Valid([]byte(c.in)); std != c.want {
			t.Errorf("json.Valid(%q) = %v, the table wants %v", name, std, c.want)
		}
		if got := Valid([]byte(c.in)); got != c.want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, c.want)
		}
	}
}

// TestValidEveryByte puts every byte in each position of a few
// documents, and every two-byte escape in a string.
func TestValidEveryByte(t *testing.T) {
	docs := []string{`{"a":[1,-2.5e+3,"x\n",true,null]}`, `""`, `0`, `[]`}
	for _, doc := range docs {
		for i := 0; i <= len(doc); i++ {
			for b := range 256 {
				// Insert b before doc[i], then put it in doc[i]'s place.
				c := string([]byte{byte(b)})
				checkSame(t, []byte(doc[:i]+c+doc[i:]))
				checkSame(t, []byte(doc[:i]+c+doc[min(i+1, len(doc)):]))
			}
		}
	}
	for b := range 256 {
		checkSame(t, []byte{'"', '\\', byte(b), '"'})
		checkSame(t, []byte{'"', '\\', 'u', '0', '0', '0', byte(b), '"'})
	}
}

func checkSame(t *testing.T, in []byte) {
	t.Helper()
	if got, want := Valid(in), json.Valid(in); got != want {
		t.Errorf("Valid(%q) = %v, json.Valid says %v", in, got, want)
	}
}

// typical is a record of the kind the session store holds.
var typical = []byte(`{"role":"assistant","content":[{"type":"text","text":"I'll read the file first."}],"tool_calls":[{"id":"call_7f3a","name":"read_file","arguments":{"path":"/work/src/main.go","limit":200}}],"usage":{"in":1534,"out":-42.5e1}}`)

func TestValidAllocs(t *testing.T) {
	deep := []byte(strings.Repeat(`[{"a":`, 100) + "1" + strings.Repeat("}]", 100))
	for _, in := range [][]byte{typical, document(), deep} {
		if !Valid(in) {
			t.Fatalf("Valid(%.40q...) = false", in)
		}
		if n := testing.AllocsPerRun(100, func() { Valid(in) }); n != 0 {
			t.Errorf("Valid(%.40q...) allocates %v times per run", in, n)
		}
	}
}

// document returns about 4KB of JSON of varied shape.
func document() []byte {
	var b strings.Builder
	b.WriteString(`{"session":"0b5e8c1e-2f4d-4b8a-9c1e-5d2f3a4b6c7d","records":[`)
	for i := 0; b.Len() < 3900; i++ {
		if i > 0 {
			b.WriteString(",\n  ")
		}
		b.WriteString(`{"seq":`)
		b.WriteString(strings.Repeat("7", 1+i%6))
		b.WriteString(`,"kind":"message","data":{"role":"user","text":"Please fix the \"flaky\" test in pkg/x\u00e9 \\ today.","ok":true,"score":-0.125e-2,"tags":["a","b",null,[]],"meta":{}}}`)
	}
	b.WriteString(`],"done":false}`)
	return []byte(b.String())
}

// seeds are valid documents the fuzz and random tests mutate.
func seeds() [][]byte {
	s := [][]byte{typical, document()}
	for _, c := range cases {
		if len(c.in) < 200 {
			s = append(s, []byte(c.in))
		}
	}
	return s
}

// TestValidRandom mutates valid documents in ways likely to land near
// the grammar's edges and compares the verdicts. It is seeded, so it
// checks the same inputs on every run.
func TestValidRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var valid [][]byte
	for _, s := range seeds() {
		if json.Valid(s) {
			valid = append(valid, s)
		}
	}
	for range 200 {
		valid = append(valid, generate(r, 0))
	}
	n, agree := 0, 0
	for range 100000 {
		in := mutate(r, valid[r.IntN(len(valid))])
		got, want := Valid(in), json.Valid(in)
		if got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", in, got, want)
		}
		n++
		if want {
			agree++
		}
	}
	t.Logf("%d inputs, %d of them valid", n, agree)
}

// tokens are fragments spliced into documents by mutate.
var tokens = []string{
	"{", "}", "[", "]", ",", ":", `"`, `\`, `\u`, `\u00`, "0", "-", "+", ".", "e", "E",
	"1", "01", "-0", "1.", ".5", "1e", "true", "fals", "null", " ", "\t", "\n", "\r", "\f",
	"\x00", "\x1f", "\x7f", "\xff", "\xc3", "é", `"a"`, `"a":`, `{}`, `[]`, `{"a":1}`, `\"`, `\\`, `\/`,
}

// mutate returns a copy of doc with one to three small edits: a byte
// deleted, replaced or inserted, a token spliced in, a span deleted or
// duplicated, or the end cut off.
func mutate(r *rand.Rand, doc []byte) []byte {
	out := append([]byte(nil), doc...)
	for range 1 + r.IntN(3) {
		i := 0
		if len(out) > 0 {
			i = r.IntN(len(out) + 1)
		}
		switch r.IntN(7) {
		case 0: // delete a byte
			if i < len(out) {
				out = append(out[:i], out[i+1:]...)
			}
		case 1: // replace a byte
			if i < len(out) {
				out[i] = randByte(r)
			}
		case 2: // insert a byte
			out = append(out[:i], append([]byte{randByte(r)}, out[i:]...)...)
		case 3, 4: // insert a token
			tok := tokens[r.IntN(len(tokens))]
			out = append(out[:i], append([]byte(tok), out[i:]...)...)
		case 5: // delete or duplicate a span
			j := i + r.IntN(8)
			if j > len(out) {
				j = len(out)
			}
			if r.IntN(2) == 0 {
				out = append(out[:i], out[j:]...)
			} else {
				span := append([]byte(nil), out[i:j]...)
				out = append(out[:j], append(span, out[j:]...)...)
			}
		case 6: // truncate
			out = out[:i]
		}
	}
	return out
}

// randByte favours the bytes JSON gives meaning to.
func randByte(r *rand.Rand) byte {
	const special = "{}[],:\"\\-+.eE0123456789tfnul \t\n\r\x00\x1f\x80\xff"
	if r.IntN(4) == 0 {
		return byte(r.IntN(256))
	}
	return special[r.IntN(len(special))]
}

// generate returns a random valid document with random spacing.
func generate(r *rand.Rand, depth int) []byte {
	sp := func() string { return []string{"", "", "", " ", "\n\t", "\r "}[r.IntN(6)] }
	var b []byte
	k := r.IntN(9)
	if depth > 4 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		b = append(b, []string{"true", "false", "null"}[r.IntN(3)]...)
	case 1, 2:
		b = append(b, []string{"0", "-0", "12", "-3.25", "1e9", "6.02E+23", "-1.5e-7", "0.0"}[r.IntN(8)]...)
	case 3, 4:
		b = append(b, []string{`""`, `"a"`, `"\u00e9\n"`, `"\"\\\/"`, "\"\xff\"", `"é"`, `"\uD83D\uDE00"`}[r.IntN(7)]...)
	case 5, 6:
		b = append(b, '[')
		n := r.IntN(4)
		for j := range n {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, sp()...)
			b = append(b, generate(r, depth+1)...)
			b = append(b, sp()...)
		}
		b = append(b, sp()...)
		b = append(b, ']')
	default:
		b = append(b, '{')
		n := r.IntN(4)
		for j := range n {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, sp()...)
			b = append(b, `"k`...)
			b = append(b, byte('a'+j))
			b = append(b, '"')
			b = append(b, sp()...)
			b = append(b, ':')
			b = append(b, sp()...)
			b = append(b, generate(r, depth+1)...)
			b = append(b, sp()...)
		}
		b = append(b, sp()...)
		b = append(b, '}')
	}
	return b
}

func FuzzValid(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		f.Add(generate(r, 0))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := Valid(in), json.Valid(in); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", in, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	for _, in := range []struct {
		name string
		data []byte
	}{
		{"record", typical},
		{"4KB", document()},
	} {
		b.Run(in.name+"/jsonvalid", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				Valid(in.data)
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				json.Valid(in.data)
			}
		})
	}
}
