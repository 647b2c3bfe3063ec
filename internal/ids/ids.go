// Package ids mints the ids the runtime hands out (run, task, session and
// child ids): time-ordered UUIDs (version 7) from github.com/google/uuid,
// with its pool of random bytes enabled (uuid.EnableRandPool), which
// reads the kernel's randomness for 16 ids at a time rather than for each.
//
// Time-ordered because the bbolt store keys a session's bucket by its id:
// new sessions then land at the end of the sessions bucket, so that the
// sessions a group commit creates share its last pages instead of each
// dirtying a page of its own at a random place. Measured (bench's 64
// parents delegating at once on one bbolt store, 3 alternating runs of
// two 1 s rounds each, 2 cores shared): 9,100–11,200 delegations/s
// against 6,300–7,900 with random (version 4) ids; one parent alone
// alike. They still carry 74 bits that are not the time (62 random), and
// ids minted in one process sort in minting order.
//
// Measured before replacing the hand-written ChaCha8 minter this package
// had (bench ids, 2 cores shared): it took 0.3 µs and 1 allocation per
// id, uuid.NewString with the pool 1.0 µs and 1 allocation. A delegation
// mints two or three ids, so the library costs about 2 µs of a parent
// run's 45 µs of CPU (SubactorParentRun): well under the 20% that would
// keep a hand-written replacement.
package ids

import "github.com/google/uuid"

// The pool must be enabled before any id is minted: uuid.EnableRandPool
// is not safe to call concurrently with the minting of one.
func init() { uuid.EnableRandPool() }

// New returns a fresh time-ordered UUID (version 7) in its 36-character
// form.
func New() string {
	// NewV7 fails only when the kernel's randomness cannot be read, which
	// uuid.NewString (version 4) answers with a panic as well.
	return uuid.Must(uuid.NewV7()).String()
}

// Valid reports whether s has the form New gives an id: a UUID in its
// canonical 36-character form (lower-case hex and hyphens). Files named
// by ids are told from others' this way.
func Valid(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}
