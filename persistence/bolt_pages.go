package persistence

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// bbolt's file format (version 2), as go.etcd.io/bbolt/internal/common
// lays it out, in the machine's byte order: a page starts with its id,
// flags, element count and overflow count (how many pages after it it
// spans); a branch page's elements are a key's position (from the element)
// and size and the child page; a leaf page's are flags, position, key size
// and value size; a bucket's value starts with its root page (0 for a
// bucket inlined in the value, whose page follows) and its sequence.
const (
	pageHeaderSize = 16
	elementSize    = 16
	bucketHeader   = 16

	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01

	// A meta page's fields after its page header.
	metaRoot     = pageHeaderSize + 16
	metaFreelist = pageHeaderSize + 32
	metaTxID     = pageHeaderSize + 48
	noFreelist   = math.MaxUint64
)

var native = binary.NativeEndian

// checkPages reads the pages of the bbolt file f, from the meta page of
// transaction txid, and returns what is wrong with them, at most
// maxProblems: a page out of the file, reached twice or of the wrong type,
// an element or key outside its page, a free page that is reachable, a
// page neither reachable nor free.
//
// bbolt's own check (tx.Check) finds all of this too, but it reads pages
// through unchecked pointers in a goroutine of its own, where a fault on a
// damaged page cannot be recovered, and it trusts counts: random damage
// made it fault about once in 200 files, and one damaged overflow count
// made it allocate 12 GB (measured). This reads the file with bounds
// checks, so tx.Check runs only on files it passed.
func checkPages(f io.ReaderAt, pageSize int, txid, pages uint64) []error {
	w := &pageWalk{f: f, pageSize: uint64(pageSize), pages: pages, reached: map[uint64]bool{0: true, 1: true}}
	var root, freelist uint64
	found := false
	for id := range uint64(2) {
		meta := make([]byte, pageHeaderSize+64)
		if _, err := f.ReadAt(meta, int64(id*w.pageSize)); err != nil {
			continue
		}
		if native.Uint64(meta[metaTxID:]) == txid {
			root, freelist, found = native.Uint64(meta[metaRoot:]), native.Uint64(meta[metaFreelist:]), true
			break
		}
	}
	if !found {
		return []error{fmt.Errorf("no meta page holds transaction %d", txid)}
	}
	w.tree(root)
	if freelist != noFreelist {
		w.freelist(freelist)
	}
	return w.problems
}

// pageWalk is the state of checkPages.
type pageWalk struct {
	f        io.ReaderAt
	pageSize uint64
	pages    uint64 // the high water mark: pages past it are not in use
	// reached marks the pages of the tree, the metas and the freelist.
	reached  map[uint64]bool
	problems []error
	spare    [][]byte // released page buffers
}

func (w *pageWalk) problem(format string, args ...any) {
	if len(w.problems) < maxProblems {
		w.problems = append(w.problems, fmt.Errorf("page "+format, args...))
	}
}

// read returns page id and its overflow pages, or nil after noting what
// is wrong: an id outside the file, a header naming another page, an
// overflow past the end, a page already reached. The caller hands the
// page back with release once done with it.
func (w *pageWalk) read(id uint64) []byte {
	if id < 2 || id >= w.pages {
		w.problem("%d: out of bounds (the file has %d pages)", id, w.pages)
		return nil
	}
	buf := w.buffer(w.pageSize)
	if _, err := w.f.ReadAt(buf, int64(id*w.pageSize)); err != nil {
		w.problem("%d: %v", id, err)
		return nil
	}
	overflow := uint64(native.Uint32(buf[12:]))
	switch named := native.Uint64(buf); {
	case named != id:
		w.problem("%d: its header names page %d", id, named)
		return nil
	case overflow >= w.pages-id:
		w.problem("%d: %d overflow pages run past the end", id, overflow)
		return nil
	}
	for o := id; o <= id+overflow; o++ {
		if w.reached[o] {
			w.problem("%d: reached twice", o)
			return nil
		}
		w.reached[o] = true
	}
	if overflow > 0 {
		buf = append(buf, make([]byte, overflow*w.pageSize)...)
		if _, err := w.f.ReadAt(buf[w.pageSize:], int64((id+1)*w.pageSize)); err != nil {
			w.problem("%d: %v", id, err)
			return nil
		}
	}
	return buf
}

// buffer returns a buffer of n bytes, reusing a released one: the walk
// holds one per level of the tree.
func (w *pageWalk) buffer(n uint64) []byte {
	if last := len(w.spare) - 1; last >= 0 {
		buf := w.spare[last]
		w.spare = w.spare[:last]
		return buf[:n]
	}
	return make([]byte, n)
}

// release hands p back for reuse.
func (w *pageWalk) release(p []byte) {
	if p != nil {
		w.spare = append(w.spare, p)
	}
}

// tree walks the B+tree whose root is page id: branch pages down to leaf
// pages, and the buckets nested in those.
func (w *pageWalk) tree(id uint64) {
	p := w.read(id)
	if p == nil {
		return
	}
	defer w.release(p)
	switch flags := native.Uint16(p[8:]); flags {
	case leafPage:
		w.leaf(id, p)
		return
	case branchPage:
	default:
		w.problem("%d: type %#x where a branch or leaf page belongs", id, flags)
		return
	}
	n, ok := w.elements(id, p)
	if !ok {
		return
	}
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		if !w.inPage(id, p, at, native.Uint32(e), native.Uint32(e[4:]), 0) {
			return
		}
		w.tree(native.Uint64(e[8:]))
	}
}

// leaf checks the elements of leaf page p, which is page id or a
// bucket's inline page on page id, and walks the buckets they hold.
func (w *pageWalk) leaf(id uint64, p []byte) {
	n, ok := w.elements(id, p)
	if !ok {
		return
	}
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		pos, ksize, vsize := native.Uint32(e[4:]), native.Uint32(e[8:]), native.Uint32(e[12:])
		if !w.inPage(id, p, at, pos, ksize, vsize) {
			return
		}
		if native.Uint32(e)&bucketLeaf != 0 {
			start := uint64(at) + uint64(pos) + uint64(ksize)
			w.bucket(id, p[start:start+uint64(vsize)])
		}
	}
}

// bucket walks the bucket whose value v sits on page id.
func (w *pageWalk) bucket(id uint64, v []byte) {
	if len(v) < bucketHeader {
		w.problem("%d: a bucket value of %d bytes", id, len(v))
		return
	}
	if root := native.Uint64(v); root != 0 {
		w.tree(root)
		return
	}
	inline := v[bucketHeader:]
	if len(inline) < pageHeaderSize || native.Uint16(inline[8:]) != leafPage {
		w.problem("%d: an inline bucket without a leaf page", id)
		return
	}
	w.leaf(id, inline)
}

// elements returns how many elements page p holds, and whether they fit
// in it.
func (w *pageWalk) elements(id uint64, p []byte) (int, bool) {
	n := int(native.Uint16(p[10:]))
	if pageHeaderSize+n*elementSize > len(p) {
		w.problem("%d: %d elements do not fit in it", id, n)
		return 0, false
	}
	return n, true
}

// inPage reports whether the key and value of the element at offset at
// of page p lie inside p.
func (w *pageWalk) inPage(id uint64, p []byte, at int, pos, ksize, vsize uint32) bool {
	if uint64(at)+uint64(pos)+uint64(ksize)+uint64(vsize) > uint64(len(p)) {
		w.problem("%d: element at %d points outside the page", id, at)
		return false
	}
	return true
}

// freelist checks the free pages against the reached ones: every page
// below the high water mark is one or the other, never both.
func (w *pageWalk) freelist(id uint64) {
	p := w.read(id)
	if p == nil {
		return
	}
	defer w.release(p)
	if flags := native.Uint16(p[8:]); flags != freelistPage {
		w.problem("%d: type %#x where the freelist belongs", id, flags)
		return
	}
	n, at := uint64(native.Uint16(p[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF { // the count overflows into the first element
		n, at = native.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(p))-at)/8 {
		w.problem("%d: %d free page ids do not fit in the freelist", id, n)
		return
	}
	free := make(map[uint64]bool, n)
	for i := range n {
		f := native.Uint64(p[at+8*i:])
		switch {
		case f < 2 || f >= w.pages:
			w.problem("%d: out of bounds but free", f)
		case free[f]:
			w.problem("%d: free twice", f)
		case w.reached[f]:
			w.problem("%d: reachable but free", f)
		}
		free[f] = true
	}
	for o := uint64(2); o < w.pages; o++ {
		if !w.reached[o] && !free[o] {
			w.problem("%d: neither reachable nor free", o)
		}
	}
}
