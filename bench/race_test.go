//go:build race

package bench

// race is whether the race detector is on: it allocates on its own
// account, so allocation counts mean nothing then.
const race = true
