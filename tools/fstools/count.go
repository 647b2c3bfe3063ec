package fstools

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"iter"
	"math/bits"
	"os"
	"unicode"
	"unicode/utf8"
)

// countBufSize is how much count reads at a time.
const countBufSize = 256 << 10

// countBufs keeps a few read buffers between counts. Unlike a sync.Pool,
// which every garbage collection empties, it keeps them across
// collections: a survey counting thousands of small files would otherwise
// allocate and clear a fresh 256 KiB buffer after each one (measured: a
// tenth of the survey's CPU time).
var countBufs = make(chan []byte, 4)

func getCountBuf() []byte {
	select {
	case b := <-countBufs:
		return b
	default:
		return make([]byte, countBufSize)
	}
}

func putCountBuf(b []byte) {
	select {
	case countBufs <- b:
	default: // enough kept: let the collector have it
	}
}

// spaces is a trie of the UTF-8 encodings of the runes unicode.IsSpace
// accepts, built from the unicode tables: spaces[node][b] is notSpace when
// no space's encoding continues with byte b, isSpace when b completes one,
// and otherwise the node to continue from. Node 0 is the first byte. An
// ASCII byte is a space or not on its own; any other byte either may start
// a multi-byte space (its entry is a node) or is a non-space: a
// continuation byte, an invalid byte, or the first byte of a rune that is
// not a space. UTF-8 is prefix-free, so a path that completes is exactly
// the space rune that decoding would yield, and one that breaks off is a
// non-space rune or an invalid byte: either way a non-space of which only
// the first byte needs to be stepped over, the rest being non-spaces alike.
var spaces = func() [][256]uint8 {
	t := make([][256]uint8, firstNode, 16) // node 1 is unused: isSpace
	for r := range spaceRunes() {
		enc := utf8.AppendRune(nil, r)
		node := 0
		for _, b := range enc[:len(enc)-1] {
			if t[node][b] < firstNode {
				t = append(t, [256]uint8{})
				t[node][b] = uint8(len(t) - 1)
			}
			node = int(t[node][b])
		}
		t[node][enc[len(enc)-1]] = isSpace
	}
	return t
}()

// spaceRunes yields the runes unicode.IsSpace accepts: the Latin-1 ones
// it lists, and above Latin-1 those of the White_Space table it consults
// (walking the table's ranges rather than testing every rune: this runs
// when the program starts).
func spaceRunes() iter.Seq[rune] {
	return func(yield func(rune) bool) {
		for r := range rune(unicode.MaxLatin1 + 1) {
			if unicode.IsSpace(r) && !yield(r) {
				return
			}
		}
		for _, r16 := range unicode.White_Space.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				if r > unicode.MaxLatin1 && !yield(r) {
					return
				}
			}
		}
		for _, r32 := range unicode.White_Space.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				if !yield(r) {
					return
				}
			}
		}
	}
}

const (
	notSpace  = 0
	isSpace   = 1
	firstNode = 2
)

// byteClass has, for each byte, bit 0 set for an ASCII space and bit 1 for
// the first byte of a possible multi-byte space (see spaces).
var byteClass = func() (c [256]uint8) {
	for b, v := range spaces[0] {
		switch {
		case v == isSpace:
			c[b] = 1
		case v >= firstNode:
			c[b] = 2
		}
	}
	return c
}()

const (
	lo7  = 0x7f7f7f7f7f7f7f7f
	hi   = 0x8080808080808080
	ones = 0x0101010101010101
)

// asciiSpaces returns a mask with the high bit of each byte of x (eight
// ASCII bytes, little-endian) that is an ASCII space ('\t' to '\r', ' ')
// set. Every byte is below 0x80, so no sum carries into its neighbour.
func asciiSpaces(x uint64) uint64 {
	ge9 := x + 0x7777777777777777  // high bit: byte >= 9
	ge14 := x + 0x7272727272727272 // high bit: byte >= 14
	notSP := (x ^ 0x2020202020202020) + lo7
	return ((ge9 &^ ge14) | ^notSP) & hi
}

// countReader streams rd and counts like wc, with words as strings.Fields
// splits them: runs of runes that are not unicode.IsSpace, where an invalid
// UTF-8 byte is a non-space rune of one byte. Lines are newlines, plus one
// for a last line without a final newline (wc -l leaves that one out).
//
// It reads in bulk and counts bytes, never decoding runes: newlines with
// bytes.Count, words eight bytes at a time, walking the encodings of
// multi-byte spaces only where one may start. The figures are exactly
// those of reading rune by rune (the tests compare the two).
func countReader(ctx context.Context, rd io.Reader) (counts, error) {
	buf := getCountBuf()
	defer putCountBuf(buf)
	return countWith(ctx, rd, buf)
}

// countWith is countReader reading into buf, which must hold at least
// utf8.UTFMax bytes.
func countWith(ctx context.Context, rd io.Reader, buf []byte) (counts, error) {
	k := newCounter(buf)
	if err := k.read(ctx, rd); err != nil {
		return counts{}, err
	}
	return k.finish(), nil
}

// maxCountBytes is how much of a file's data one count reads at most, so
// that a call ends in seconds whatever the file; the holes of a sparse
// file, where the OS tells where they are, are counted without reading.
const maxCountBytes = 1 << 30

// countFile counts the regular file f of size bytes as countReader does,
// skipping its holes (runs of zero bytes the file system does not store,
// counted without reading them; see dataAt) and reading at most limit
// bytes of its data. Past limit it stops: the result is Truncated, its
// lines and words are those of the first Counted bytes, and Bytes is
// size. read is how many bytes it read.
func countFile(ctx context.Context, f *os.File, size, limit int64) (c counts, read int64, err error) {
	return countData(ctx, f, size, limit, true)
}

// countData is countFile, counting words only when words is set: else
// Words stays 0 and no byte is looked at but by bytes.Count.
func countData(ctx context.Context, f *os.File, size, limit int64, words bool) (c counts, read int64, err error) {
	buf := getCountBuf()
	defer putCountBuf(buf)
	k := newCounter(buf)
	k.noWords = !words
	off := int64(0)
	for off < size {
		if err := ctx.Err(); err != nil {
			return counts{}, read, err
		}
		// A file that fits in one read is read whole: asking where its
		// holes are would cost more system calls than reading them.
		start, end := off, size
		if size > int64(len(k.buf)) {
			start, end = dataAt(f, off, size)
		}
		k.zeros(start - off)
		off = start
		if off >= size || read >= limit {
			break
		}
		before := k.c.Bytes
		err = k.read(ctx, io.NewSectionReader(f, off, min(end-off, limit-read)))
		n := k.c.Bytes - before
		read += n
		if err != nil {
			return counts{}, read, err
		}
		if n == 0 {
			break // the file shrank: its end came early
		}
		off += n
	}
	c = k.finish()
	if off < size {
		c.Truncated, c.Counted, c.Bytes = true, c.Bytes, size
	}
	return c, read, nil
}

// counter counts like countReader across reads and holes: buf holds a
// read, and at its start the bytes of a possible multi-byte space cut by
// the end of the last read (carry).
type counter struct {
	c  counts
	st wordState
	// noWords skips the word count: lines and bytes only.
	noWords bool
	buf     []byte
	carry   int
	last    byte // the last byte counted
}

func newCounter(buf []byte) *counter { return &counter{buf: buf, last: '\n'} }

// read counts rd to its end.
func (k *counter) read(ctx context.Context, rd io.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := rd.Read(k.buf[k.carry:])
		if n > 0 {
			end := k.carry + n
			chunk := k.buf[k.carry:end]
			k.c.Bytes += int64(n)
			k.c.Lines += int64(bytes.Count(chunk, newline))
			k.last = chunk[n-1]
			if !k.noWords {
				done := k.st.scan(k.buf[:end], false)
				k.carry = copy(k.buf, k.buf[done:end])
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// zeros counts n zero bytes without reading them: a zero byte is no
// newline and no space, so a run of them adds to the word at hand or
// starts one. Only the first is scanned: it also settles a space cut by
// the last read (no space's encoding goes on with a zero byte).
func (k *counter) zeros(n int64) {
	if n <= 0 {
		return
	}
	k.c.Bytes += n
	k.last = 0
	if k.noWords {
		return
	}
	k.buf[k.carry] = 0
	done := k.st.scan(k.buf[:k.carry+1], false)
	k.carry = copy(k.buf, k.buf[done:k.carry+1])
}

// finish settles what the last read left and returns the figures.
func (k *counter) finish() counts {
	k.st.scan(k.buf[:k.carry], true)
	k.carry = 0
	if k.last != '\n' {
		k.c.Lines++
	}
	k.c.Words = k.st.words
	return k.c
}

var newline = []byte{'\n'}

// wordState carries the word count across reads.
type wordState struct {
	words  int64
	inWord bool // the last rune scanned was not a space
}

// scan counts the words starting in b and returns how many bytes it
// consumed: all of them, but for a possible multi-byte space cut by the end
// of b when more is to come (final is false).
func (s *wordState) scan(b []byte, final bool) int {
	words := 0
	prev := uint64(1) // 1: the previous rune was a space, or there was none
	if s.inWord {
		prev = 0
	}
	// Eight bytes at a time: sp marks the spaces among them (each byte's
	// high bit), and a word starts at each non-space after a space.
	i, n := 0, len(b)
	for i < n {
		// Plain ASCII, 32 bytes at a time while it lasts.
		for i+32 <= n {
			w := b[i : i+32 : i+32]
			x0 := binary.LittleEndian.Uint64(w[0:])
			x1 := binary.LittleEndian.Uint64(w[8:])
			x2 := binary.LittleEndian.Uint64(w[16:])
			x3 := binary.LittleEndian.Uint64(w[24:])
			if (x0|x1|x2|x3)&hi != 0 {
				break
			}
			s0, s1, s2, s3 := asciiSpaces(x0), asciiSpaces(x1), asciiSpaces(x2), asciiSpaces(x3)
			words += bits.OnesCount64(^s0&(s0<<8|prev<<7)&hi) + bits.OnesCount64(^s1&(s1<<8|s0>>56)&hi) +
				bits.OnesCount64(^s2&(s2<<8|s1>>56)&hi) + bits.OnesCount64(^s3&(s3<<8|s2>>56)&hi)
			prev = s3 >> 63
			i += 32
		}
		if i+16 <= n {
			x := binary.LittleEndian.Uint64(b[i:])
			y := binary.LittleEndian.Uint64(b[i+8:])
			if (x|y)&hi == 0 {
				sx, sy := asciiSpaces(x), asciiSpaces(y)
				words += bits.OnesCount64(^sx&(sx<<8|prev<<7)&hi) + bits.OnesCount64(^sy&(sy<<8|sx>>56)&hi)
				prev = sy >> 63
				i += 16
				continue
			}
		}
		if i+8 <= n {
			x := binary.LittleEndian.Uint64(b[i:])
			if x&hi == 0 {
				sp := asciiSpaces(x)
				words += bits.OnesCount64(^sp & (sp<<8 | prev<<7) & hi)
				prev = sp >> 63
				i += 8
				continue
			}
			// Not ASCII: by table, walking the encodings of possible
			// multi-byte spaces.
			cls := uint64(byteClass[b[i]]) | uint64(byteClass[b[i+1]])<<8 |
				uint64(byteClass[b[i+2]])<<16 | uint64(byteClass[b[i+3]])<<24 |
				uint64(byteClass[b[i+4]])<<32 | uint64(byteClass[b[i+5]])<<40 |
				uint64(byteClass[b[i+6]])<<48 | uint64(byteClass[b[i+7]])<<56
			sp := (cls & ones) << 7
			leads := cls & (ones << 1)
			for leads != 0 {
				// Walk the encoding a lead byte may start; a space
				// marks all its bytes as spaces.
				k := bits.TrailingZeros64(leads) / 8
				leads &= leads - 1
				v, j := spaces[0][b[i+k]], i+k+1
				for v >= firstNode && j < n {
					v = spaces[v][b[j]]
					j++
				}
				if v == isSpace && j <= i+8 {
					sp |= (1<<(8*(j-i-k)) - 1) << (8 * k) & hi
				} else if v != notSpace {
					// Cut by the end of b, or reaching into the
					// next eight bytes: byte by byte.
					goto bytewise
				}
			}
			words += bits.OnesCount64(^sp & (sp<<8 | prev<<7) & hi)
			prev = sp >> 63
			i += 8
			continue
		}
	bytewise:
		// Byte by byte up to the next eight.
		for lim := min(i+8, n); i < lim; {
			v := spaces[0][b[i]]
			if v < firstNode {
				sp := uint64(v)
				words += int(prev &^ sp)
				prev = sp
				i++
				continue
			}
			j := i + 1
			for v >= firstNode && j < n {
				v = spaces[v][b[j]]
				j++
			}
			if v >= firstNode && !final {
				// Cut by the end of b: decide once the rest is read.
				s.words += int64(words)
				s.inWord = prev == 0
				return i
			}
			if v == isSpace {
				prev = 1
				i = j
			} else {
				words += int(prev)
				prev = 0
				i++
			}
		}
	}
	s.words += int64(words)
	s.inWord = prev == 0
	return n
}
