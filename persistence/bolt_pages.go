package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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

// A meta page's fields after its page header, and what bbolt's init
// writes: its first commit is transaction 2, on meta page 0.
const (
	metaMagic    = pageHeaderSize
	metaVersion  = pageHeaderSize + 4
	metaPgid     = pageHeaderSize + 40
	metaChecksum = pageHeaderSize + 56
	metaEnd      = pageHeaderSize + 64
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
)

// boltMeta is one of a bbolt file's two meta pages, as read from the file.
type boltMeta struct {
	txid, root, freelist, pgid uint64
	// err says why bbolt would skip the page; nil when it would not.
	err error
}

// parseMeta reads the meta page at the start of b and checks it as bbolt
// does: magic, version and checksum.
func parseMeta(b []byte) boltMeta {
	if len(b) < metaEnd {
		return boltMeta{err: fmt.Errorf("it is cut short at %d bytes", len(b))}
	}
	m := boltMeta{txid: native.Uint64(b[metaTxID:]), root: native.Uint64(b[metaRoot:]),
		freelist: native.Uint64(b[metaFreelist:]), pgid: native.Uint64(b[metaPgid:])}
	h := fnv.New64a()
	h.Write(b[pageHeaderSize:metaChecksum])
	switch {
	case native.Uint32(b[metaMagic:]) != boltMagic:
		m.err = errors.New("not a meta page")
	case native.Uint32(b[metaVersion:]) != boltVersion:
		m.err = fmt.Errorf("format version %d", native.Uint32(b[metaVersion:]))
	case native.Uint64(b[metaChecksum:]) != h.Sum64():
		m.err = errors.New("its checksum does not match")
	}
	return m
}

// readMetas reads both meta pages of the bbolt file f, whose pages are
// pageSize bytes.
func readMetas(f io.ReaderAt, pageSize int) [2]boltMeta {
	var metas [2]boltMeta
	for i := range metas {
		b := make([]byte, metaEnd)
		n, _ := f.ReadAt(b, int64(i*pageSize))
		metas[i] = parseMeta(b[:n])
	}
	return metas
}

// inUse returns the meta page bbolt reads: the valid one with the
// higher transaction.
func inUse(metas [2]boltMeta) (boltMeta, bool) {
	a, b := metas[0], metas[1]
	if b.txid > a.txid {
		a, b = b, a
	}
	switch {
	case a.err == nil:
		return a, true
	case b.err == nil:
		return b, true
	}
	return boltMeta{}, false
}

// metaDamage names each meta page that bbolt skips, with the transaction
// the store reads instead and what that loses. bbolt writes transaction
// N's meta to page N%2, so the damaged page held the one after the
// other's (the last commit, lost) or the one before (nothing lost); its
// own transaction field says which unless the damage is there.
func metaDamage(metas [2]boltMeta) []error {
	var damage []error
	for i, m := range metas {
		other := metas[1-i]
		if m.err == nil || other.err != nil {
			continue // both damaged: bbolt does not open the file
		}
		lost := fmt.Sprintf("if it held transaction %d, that commit is lost", other.txid+1)
		switch m.txid {
		case other.txid + 1:
			lost = fmt.Sprintf("the last commit (transaction %d) is lost", m.txid)
		case other.txid - 1:
			lost = "it held the commit before that one, so nothing is lost"
		}
		damage = append(damage, fmt.Errorf("meta page %d is damaged (%v): the store reads transaction %d, %s", i, m.err, other.txid, lost))
	}
	return damage
}

// neverCommitted reports whether the bbolt file f provably never held a
// commit, so that nothing in it can be lost: it is empty (a node killed
// before bbolt wrote it), or meta page 0 is still the one bbolt's init
// wrote (transaction 0; what follows it may be cut short), which the
// first commit (transaction 2) overwrites. Anything else is left to
// bbolt, which refuses what is not its own.
func neverCommitted(f io.ReaderAt) (bool, error) {
	b := make([]byte, metaEnd)
	n, err := f.ReadAt(b, 0)
	switch {
	case n == 0 && err == io.EOF:
		return true, nil
	case n < len(b):
		return false, nil
	}
	m := parseMeta(b)
	return m.err == nil && m.txid == 0, nil
}

// checkPages reads the pages of the bbolt file f, from meta page m, and
// notes what is wrong with them, at most maxProblems: a page out of the
// file, reached twice or of the wrong type, an element or key outside its
// page, a free page that is reachable, a page neither reachable nor free.
// The walk it returns also knows which pages are reached and free, for
// the page scan of a damaged file (see scanPages).
//
// bbolt's own check (tx.Check) finds all of this too, but it reads pages
// through unchecked pointers in a goroutine of its own, where a fault on a
// damaged page cannot be recovered, and it trusts counts: random damage
// made it fault about once in 200 files, and one damaged overflow count
// made it allocate 12 GB (measured). This reads the file with bounds
// checks, visiting each page at most once, so tx.Check runs only on files
// it passed, and bbolt's cursors (which loop on a page that names its own
// ancestor) only on trees it passed.
func checkPages(f io.ReaderAt, pageSize int, m boltMeta, pages uint64) *pageWalk {
	w := &pageWalk{f: f, pageSize: uint64(pageSize), pages: pages, root: m.root,
		reached: map[uint64]bool{0: true, 1: true}, free: map[uint64]bool{}}
	w.tree(m.root)
	w.treeDamaged = len(w.problems) > 0
	if m.freelist != noFreelist {
		w.freelist(m.freelist)
	}
	return w
}

// pageWalk is the state of checkPages.
type pageWalk struct {
	f        io.ReaderAt
	pageSize uint64
	pages    uint64 // the high water mark: pages past it are not in use
	root     uint64 // the root bucket's page
	// reached marks the pages of the tree, the metas and the freelist;
	// free, the pages the freelist names.
	reached, free map[uint64]bool
	problems      []error
	// treeDamaged is set when the tree itself has problems: bbolt's
	// cursors must not walk it.
	treeDamaged bool
	spare       [][]byte // released page buffers
}

func (w *pageWalk) problem(format string, args ...any) {
	if len(w.problems) < maxProblems {
		w.problems = append(w.problems, fmt.Errorf("page "+format, args...))
	}
}

// load reads page id and its overflow pages into buf (a page long, or
// nil for a fresh one), checking that they lie in the file and that the
// header names the page.
func (w *pageWalk) load(id uint64, buf []byte) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, fmt.Errorf("%d: out of bounds (the file has %d pages)", id, w.pages)
	}
	if buf == nil {
		buf = make([]byte, w.pageSize)
	}
	if _, err := w.f.ReadAt(buf, int64(id*w.pageSize)); err != nil {
		return nil, fmt.Errorf("%d: %w", id, err)
	}
	overflow := uint64(native.Uint32(buf[12:]))
	switch named := native.Uint64(buf); {
	case named != id:
		return nil, fmt.Errorf("%d: its header names page %d", id, named)
	case overflow >= w.pages-id:
		return nil, fmt.Errorf("%d: %d overflow pages run past the end", id, overflow)
	}
	if overflow > 0 {
		buf = append(buf, make([]byte, overflow*w.pageSize)...)
		if _, err := w.f.ReadAt(buf[w.pageSize:], int64((id+1)*w.pageSize)); err != nil {
			return nil, fmt.Errorf("%d: %w", id, err)
		}
	}
	return buf, nil
}

// read returns page id and its overflow pages, or nil after noting what
// is wrong: see load, and a page already reached. The caller hands the
// page back with release once done with it.
func (w *pageWalk) read(id uint64) []byte {
	buf, err := w.load(id, w.buffer(w.pageSize))
	if err != nil {
		w.problem("%v", err)
		return nil
	}
	for o := id; o <= id+uint64(native.Uint32(buf[12:])); o++ {
		if w.reached[o] {
			w.problem("%d: reached twice", o)
			return nil
		}
		w.reached[o] = true
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
	case branchPage:
		children, err := branchChildren(p)
		if err != nil {
			w.problem("%d: %v", id, err)
			return
		}
		for _, child := range children {
			w.tree(child)
		}
	default:
		w.problem("%d: type %#x where a branch or leaf page belongs", id, flags)
	}
}

// leaf checks the elements of leaf page p, which is page id or a
// bucket's inline page on page id, and walks the buckets they hold.
func (w *pageWalk) leaf(id uint64, p []byte) {
	kvs, err := leafElements(p)
	if err != nil {
		w.problem("%d: %v", id, err)
		return
	}
	for _, kv := range kvs {
		if !kv.bucket {
			continue
		}
		if len(kv.value) < bucketHeader {
			w.problem("%d: a bucket value of %d bytes", id, len(kv.value))
			continue
		}
		if root := native.Uint64(kv.value); root != 0 {
			w.tree(root)
			continue
		}
		inline, err := inlinePage(kv.value)
		if err != nil {
			w.problem("%d: %v", id, err)
			continue
		}
		w.leaf(id, inline)
	}
}

// rawKV is a leaf element as it lies in its page.
type rawKV struct {
	key, value []byte
	bucket     bool // the value is a nested bucket's
}

// elements returns how many elements page p holds, if they fit in it.
func elements(p []byte) (int, error) {
	n := int(native.Uint16(p[10:]))
	if pageHeaderSize+n*elementSize > len(p) {
		return 0, fmt.Errorf("%d elements do not fit in it", n)
	}
	return n, nil
}

// inPage checks that the key and value of the element at offset at of
// page p lie inside p.
func inPage(p []byte, at int, pos, ksize, vsize uint32) error {
	if uint64(at)+uint64(pos)+uint64(ksize)+uint64(vsize) > uint64(len(p)) {
		return fmt.Errorf("element at %d points outside the page", at)
	}
	return nil
}

// branchChildren returns the pages branch page p points to.
func branchChildren(p []byte) ([]uint64, error) {
	n, err := elements(p)
	if err != nil {
		return nil, err
	}
	children := make([]uint64, n)
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		if err := inPage(p, at, native.Uint32(e), native.Uint32(e[4:]), 0); err != nil {
			return nil, err
		}
		children[i] = native.Uint64(e[8:])
	}
	return children, nil
}

// leafElements returns the elements of leaf page p, slices of p.
func leafElements(p []byte) ([]rawKV, error) {
	n, err := elements(p)
	if err != nil {
		return nil, err
	}
	kvs := make([]rawKV, n)
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		pos, ksize, vsize := native.Uint32(e[4:]), native.Uint32(e[8:]), native.Uint32(e[12:])
		if err := inPage(p, at, pos, ksize, vsize); err != nil {
			return nil, err
		}
		start := uint64(at) + uint64(pos)
		kvs[i] = rawKV{key: p[start : start+uint64(ksize)], value: p[start+uint64(ksize) : start+uint64(ksize)+uint64(vsize)],
			bucket: native.Uint32(e)&bucketLeaf != 0}
	}
	return kvs, nil
}

// inlinePage returns the leaf page inlined in bucket value v.
func inlinePage(v []byte) ([]byte, error) {
	inline := v[bucketHeader:]
	if len(inline) < pageHeaderSize || native.Uint16(inline[8:]) != leafPage {
		return nil, errors.New("an inline bucket without a leaf page")
	}
	return inline, nil
}

// rawBucket reads, from the file's pages, the elements of the bucket
// whose value is v (at least bucketHeader bytes) and its sequence,
// reading each page at most once: damage can make a tree name a page
// twice, or its own ancestor.
func (w *pageWalk) rawBucket(v []byte) ([]rawKV, uint64, error) {
	seq := native.Uint64(v[8:])
	if native.Uint64(v) == 0 {
		inline, err := inlinePage(v)
		if err != nil {
			return nil, 0, err
		}
		kvs, err := leafElements(inline)
		return kvs, seq, err
	}
	var kvs []rawKV
	seen := map[uint64]bool{}
	var walk func(id uint64) error
	walk = func(id uint64) error {
		if seen[id] {
			return fmt.Errorf("page %d: reached twice", id)
		}
		seen[id] = true
		p, err := w.load(id, nil)
		if err != nil {
			return fmt.Errorf("page %w", err)
		}
		var children []uint64
		switch flags := native.Uint16(p[8:]); flags {
		case leafPage:
			leaf, err := leafElements(p)
			kvs = append(kvs, leaf...)
			return err
		case branchPage:
			if children, err = branchChildren(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d: type %#x where a branch or leaf page belongs", id, flags)
		}
		for _, child := range children {
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	return kvs, seq, walk(native.Uint64(v))
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
	free := w.free
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
