// Package boltdamage breaks bbolt files the way a damaged disk would, for
// the tests of the stores and of the node's check.
package boltdamage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// FlipFreelistBit damages a bbolt file the way a flipped bit on disk
// would: it flips bit n of the page ids in the freelist that the file's
// current meta page names (bit 0 is the lowest bit of the first id). No
// store may hold the file. It fails if the file has no freelist or the
// freelist has fewer bits.
func FlipFreelistBit(path string, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	at, count, err := FreelistPage(f)
	if err != nil {
		return err
	}
	if count == 0xFFFF || n >= 64*count {
		return fmt.Errorf("the freelist holds %d page ids: no bit %d", count, n)
	}
	b := make([]byte, 1)
	at += 16 + int64(n/8)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 1 << (n % 8)
	if _, err := f.WriteAt(b, at); err != nil {
		return err
	}
	return f.Sync()
}

// FreelistPage returns the offset in the bbolt file f of the freelist page
// that its current meta page names, and the count in the page's header.
func FreelistPage(f io.ReaderAt) (offset int64, count int, err error) {
	m, err := currentMeta(f)
	if err != nil {
		return 0, 0, err
	}
	if m.freelist == ^uint64(0) {
		return 0, 0, errors.New("no freelist page")
	}
	head := make([]byte, 16)
	at := int64(m.freelist * m.pageSize)
	if _, err := f.ReadAt(head, at); err != nil {
		return 0, 0, err
	}
	return at, int(binary.NativeEndian.Uint16(head[10:])), nil
}

// meta is what these helpers read of a bbolt meta page.
type meta struct {
	page, pageSize, root, freelist, txid uint64
}

// currentMeta reads the meta page with the higher transaction id of the
// bbolt file f: bbolt's meta page, after a 16-byte page header, in the
// machine's byte order, is magic, version, page size, flags, root bucket
// (16 bytes), freelist page, high water mark, transaction id, checksum.
func currentMeta(f io.ReaderAt) (meta, error) {
	const magic = 0xED0CDAED
	var cur meta
	for i := range uint64(2) { // meta 1 follows meta 0, a page on
		b := make([]byte, 80)
		if _, err := f.ReadAt(b, int64(i*cur.pageSize)); err != nil {
			return meta{}, err
		}
		m := b[16:]
		if binary.NativeEndian.Uint32(m) != magic {
			return meta{}, fmt.Errorf("meta page %d is damaged already", i)
		}
		cur.pageSize = uint64(binary.NativeEndian.Uint32(m[8:]))
		if tx := binary.NativeEndian.Uint64(m[48:]); i == 0 || tx > cur.txid {
			cur.page, cur.txid = i, tx
			cur.root, cur.freelist = binary.NativeEndian.Uint64(m[16:]), binary.NativeEndian.Uint64(m[32:])
		}
	}
	return cur, nil
}

// FlipMetaBit flips one bit of the flags field of the bbolt file's current
// meta page (the one with the higher transaction id), as a damaged disk
// would: bbolt then finds its checksum wrong and reads the other meta
// page, one commit older, without a word. It returns the page's number
// and transaction id.
func FlipMetaBit(path string) (page int, txid uint64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	m, err := currentMeta(f)
	if err != nil {
		return 0, 0, err
	}
	at := int64(m.page*m.pageSize) + 16 + 12 // the flags field
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		return 0, 0, err
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b, at); err != nil {
		return 0, 0, err
	}
	return int(m.page), m.txid, f.Sync()
}

// RelinkSessionsBranch damages the branch page at the root of the
// "sessions" bucket of the bbolt file at path: its element elem is made
// to point at the page element to points at, or, with to < 0, at the
// branch page itself (a loop). With elem 1 and to 0 the page points two
// elements at one leaf, and the sessions on the leaf element 1 pointed at
// are reached by no path. It fails if the bucket's root is not a branch
// page with more than elem elements.
func RelinkSessionsBranch(path string, elem, to int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := currentMeta(f)
	if err != nil {
		return err
	}
	root, err := readPage(f, m, m.root)
	if err != nil {
		return err
	}
	sessions := uint64(0)
	for i := range int(binary.NativeEndian.Uint16(root[10:])) { // leaf elements
		e := root[16+16*i:]
		pos, ksize := binary.NativeEndian.Uint32(e[4:]), binary.NativeEndian.Uint32(e[8:])
		key := e[pos : pos+ksize]
		if string(key) == "sessions" {
			sessions = binary.NativeEndian.Uint64(e[pos+ksize:])
		}
	}
	branch, err := readPage(f, m, sessions)
	switch {
	case err != nil:
		return err
	case binary.NativeEndian.Uint16(branch[8:]) != 0x01 || int(binary.NativeEndian.Uint16(branch[10:])) <= max(elem, to):
		return fmt.Errorf("the sessions bucket's root, page %d, is not a branch page of more than %d elements", sessions, max(elem, to))
	}
	target := sessions
	if to >= 0 {
		target = binary.NativeEndian.Uint64(branch[16+16*to+8:])
	}
	binary.NativeEndian.PutUint64(branch[16+16*elem+8:], target)
	if _, err := f.WriteAt(branch, int64(sessions*m.pageSize)); err != nil {
		return err
	}
	return f.Sync()
}

// readPage reads page id of the bbolt file f (its first page only).
func readPage(f io.ReaderAt, m meta, id uint64) ([]byte, error) {
	if id < 2 {
		return nil, fmt.Errorf("no page %d to read", id)
	}
	p := make([]byte, m.pageSize)
	_, err := f.ReadAt(p, int64(id*m.pageSize))
	return p, err
}
