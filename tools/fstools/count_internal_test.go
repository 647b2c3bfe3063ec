package fstools

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
	"unicode"
	"unicode/utf8"
)

// referenceCount is the obvious definition count must match: rune by rune
// through bufio.Reader.ReadRune and unicode.IsSpace, an invalid byte being
// a non-space rune of one byte, and a last line without a final newline
// counting as a line.
func referenceCount(data []byte) counts {
	var c counts
	br := bufio.NewReader(bytes.NewReader(data))
	inWord := false
	last := rune('\n')
	for {
		ch, size, err := br.ReadRune()
		if err != nil {
			break
		}
		c.Bytes += int64(size)
		if ch == '\n' {
			c.Lines++
		}
		space := unicode.IsSpace(ch)
		if !space && !inWord {
			c.Words++
		}
		inWord = !space
		last = ch
	}
	if last != '\n' {
		c.Lines++
	}
	return c
}

// pieces are what random data is made of: ASCII words and spaces, every
// multi-byte space, other runes, and bytes that are not UTF-8 on their own
// (continuation bytes, cut sequences, the lead bytes of spaces alone).
var pieces = func() [][]byte {
	out := [][]byte{
		[]byte("a"), []byte("word"), []byte("x1"), []byte(" "), []byte("\t"), []byte("\n"), []byte("\r\n"),
		[]byte("\v"), []byte("\f"), []byte("  "), []byte("ü"), []byte("中文"), []byte("😀"), []byte("\u00a0"),
		[]byte("\u0085"), {0x85}, {0xa0}, {0xff}, {0xfe}, {0x80}, {0xc2}, {0xe2}, {0xe2, 0x80}, {0xe1, 0x9a},
		{0xe3, 0x80}, {0xf0, 0x9f}, {0xed, 0xa0, 0x80}, {0xc0, 0x80}, {0xef, 0xbf, 0xbd},
	}
	for r := range rune(unicode.MaxRune + 1) {
		if unicode.IsSpace(r) && r >= utf8.RuneSelf {
			out = append(out, utf8.AppendRune(nil, r))
		}
	}
	return out
}()

func randomData(rng *rand.Rand, size int) []byte {
	var b []byte
	for len(b) < size {
		if rng.IntN(4) == 0 {
			// Long ASCII runs take the eight-bytes-at-a-time path.
			for range rng.IntN(40) {
				b = append(b, "abc de\tfghij\n  klm"[rng.IntN(18)])
			}
			continue
		}
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return b
}

// TestCountMatchesTheRuneByRuneReference compares count with the
// reference on random data (invalid UTF-8, multi-byte spaces, with and
// without a final newline) read through buffers of many sizes and readers
// that return short reads, so that runes are cut at every boundary.
func TestCountMatchesTheRuneByRuneReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := range 400 {
		data := randomData(rng, rng.IntN(3000))
		switch i % 3 {
		case 0:
			data = append(data, '\n')
		case 1:
			data = bytes.TrimRight(data, "\n")
		}
		want := referenceCount(data)
		for _, size := range []int{utf8.UTFMax, 5, 7, 8, 9, 13, 64, 1000, countBufSize} {
			for name, rd := range map[string]io.Reader{
				"whole":    bytes.NewReader(data),
				"one-byte": iotest.OneByteReader(bytes.NewReader(data)),
				"half":     iotest.HalfReader(bytes.NewReader(data)),
				"data-err": iotest.DataErrReader(bytes.NewReader(data)),
			} {
				got, err := countWith(ctx, rd, make([]byte, size))
				if err != nil || got != want {
					t.Fatalf("data %q, buffer %d, reader %s: got %+v, %v; want %+v", data, size, name, got, err, want)
				}
			}
		}
	}
}

func TestCountBigFileAndReadError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := randomData(rng, 3*countBufSize+17)
	got, err := countReader(context.Background(), bytes.NewReader(data))
	if want := referenceCount(data); err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	boom := io.ErrClosedPipe
	if _, err := countReader(context.Background(), iotest.TimeoutReader(bytes.NewReader(data))); err == nil {
		t.Fatal("a read error was not reported")
	}
	if _, err := countReader(context.Background(), io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom))); err != boom {
		t.Fatalf("read error %v, want %v", err, boom)
	}
}

func FuzzCount(f *testing.F) {
	for _, s := range []string{"", "\n", "a b", "\xe2\x80\xa8x", "\xe2\x80", "a\u3000b\u00a0c\xff\n", "  x  \t\r\n\v"} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		want := referenceCount(data)
		got, err := countWith(context.Background(), iotest.HalfReader(bytes.NewReader(data)), make([]byte, utf8.UTFMax+int(size)))
		if err != nil || got != want {
			t.Fatalf("got %+v, %v; want %+v", got, err, want)
		}
	})
}

// benchData is 8 MiB of source-like ASCII text, of prose in UTF-8 with
// multi-byte spaces, or of random bytes.
func benchData(kind string) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, 0, 8<<20)
	for len(b) < 8<<20 {
		switch kind {
		case "binary":
			b = binaryAppend(b, rng.Uint64())
		case "prose":
			b = append(b, "Über die Brücke\u00a0— naïve café, 日本語\u3000の文章 déjà vu.\n"...)
		default:
			b = append(b, "\tif err := f(x, y); err != nil {\n\t\treturn err // a comment\n\t}\n"...)
		}
	}
	return b
}

func BenchmarkCount(b *testing.B) {
	for _, kind := range []string{"text", "prose", "binary"} {
		data := benchData(kind)
		b.Run(kind+"/bulk", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := countReader(context.Background(), bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/rune-by-rune", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				referenceCount(data)
			}
		})
	}
}

func binaryAppend(b []byte, v uint64) []byte {
	for range 8 {
		b = append(b, byte(v))
		v >>= 8
	}
	return b
}

// Contract K3 (item 6 of issue 18): the holes of a sparse file are counted
// without reading them, as the zero bytes they read as: random data and
// runs of zeros fed to the counter, read or skipped, give the figures of
// reading them all, runes and multi-byte spaces cut at every boundary.
func TestK3_ZerosCountAsReadingThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ctx := context.Background()
	for range 400 {
		var all []byte
		k := newCounter(make([]byte, utf8.UTFMax+rng.IntN(20)))
		for range rng.IntN(6) {
			if rng.IntN(2) == 0 {
				n := rng.IntN(50)
				all = append(all, make([]byte, n)...)
				k.zeros(int64(n))
				continue
			}
			data := randomData(rng, rng.IntN(200))
			all = append(all, data...)
			if err := k.read(ctx, iotest.HalfReader(bytes.NewReader(data))); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := k.finish(), referenceCount(all); got != want {
			t.Fatalf("data %q: got %+v, want %+v", all, got, want)
		}
	}
}

// Contract K3: past its limit a count stops, says so and how far it
// counted, and still gives the file's size.
func TestK3_CountStopsAtItsByteLimit(t *testing.T) {
	data := []byte("one two\nthree four\nfive\n")
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(data))
	got, read, err := countFile(context.Background(), f, size, 10)
	want := referenceCount(data[:10])
	want.Bytes, want.Truncated, want.Counted = size, true, 10
	if err != nil || got != want || read != 10 {
		t.Fatalf("limited to 10 bytes: %+v, read %d, %v; want %+v", got, read, err, want)
	}
	got, read, err = countFile(context.Background(), f, size, size)
	if want := referenceCount(data); err != nil || got != want || read != size {
		t.Fatalf("limited to its size: %+v, read %d, %v; want %+v", got, read, err, want)
	}
}

// Contract K3: a count of a directory reads at most its limit in all:
// past it, files add their size but no lines, and the result says so.
func TestK3_CountOfADirectoryStopsAtItsByteLimit(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("1\n2\n3\n4\n"), 0o600); err != nil { // 8 bytes, 4 lines
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for limit, want := range map[int64]string{
		24: `{"path":"d","files":3,"lines":12,"bytes":24}`,
		12: `{"path":"d","files":3,"lines":6,"bytes":24,"truncated":true,"counted":12}`, // 8 of one file, 4 of the next
		0:  `{"path":"d","files":3,"lines":0,"bytes":24,"truncated":true}`,
	} {
		got, err := countDir(context.Background(), r, ".", "d", limit)
		if err != nil || got != want {
			t.Errorf("limit %d: %s, %v; want %s", limit, got, err, want)
		}
	}
}

// spaceRunes yields exactly the runes unicode.IsSpace accepts.
func TestSpaceRunesAreIsSpace(t *testing.T) {
	var got, want []rune
	for r := range spaceRunes() {
		got = append(got, r)
	}
	for r := range rune(unicode.MaxRune + 1) {
		if unicode.IsSpace(r) {
			want = append(want, r)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("spaceRunes %U, unicode.IsSpace %U", got, want)
	}
}
