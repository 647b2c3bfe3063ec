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
	// bbolt's meta page, after a 16-byte page header, in the machine's
	// byte order: magic, version, page size, flags, root bucket (16
	// bytes), freelist page, high water mark, transaction id.
	const magic = 0xED0CDAED
	var pageSize, freelist, txid uint64
	for i := range uint64(2) { // meta 1 follows meta 0, a page on
		meta := make([]byte, 80)
		if _, err := f.ReadAt(meta, int64(i*pageSize)); err != nil {
			return 0, 0, err
		}
		m := meta[16:]
		if binary.NativeEndian.Uint32(m) != magic {
			return 0, 0, fmt.Errorf("meta page %d is damaged already", i)
		}
		pageSize = uint64(binary.NativeEndian.Uint32(m[8:]))
		if tx := binary.NativeEndian.Uint64(m[48:]); tx >= txid {
			freelist, txid = binary.NativeEndian.Uint64(m[32:]), tx
		}
	}
	if freelist == ^uint64(0) {
		return 0, 0, errors.New("no freelist page")
	}
	head := make([]byte, 16)
	at := int64(freelist * pageSize)
	if _, err := f.ReadAt(head, at); err != nil {
		return 0, 0, err
	}
	return at, int(binary.NativeEndian.Uint16(head[10:])), nil
}
