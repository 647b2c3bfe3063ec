// Package ids mints the ids the runtime hands out (run, task and child
// ids): random version 4 UUIDs from a ChaCha8 generator seeded once from
// the operating system. crypto/rand asks the kernel on every call, which
// cost a delegation about a microsecond per id; ChaCha8 is a
// cryptographically strong generator, so the ids are as unlikely to
// collide as crypto/rand's.
package ids

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync"
)

var (
	mu  sync.Mutex
	gen = seeded()
)

func seeded() *rand.ChaCha8 {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (crypto/rand crashes the program instead)
	return rand.NewChaCha8(seed)
}

// New returns a fresh random UUID (version 4) in its 36-character form.
func New() string {
	var b [16]byte
	mu.Lock()
	_, _ = gen.Read(b[:]) // a ChaCha8 never fails to read
	mu.Unlock()
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
