package agent

import (
	"testing"
	"unsafe"
)

// Every parked child is an Agent (issue 11): it stays within the 352-byte
// size class on 64-bit platforms (320 until its log fence, S8, took two
// words). What only some agents need (a delegating
// parent's side, a system prompt and output schema) is allocated apart.
func TestAgentSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("size classes of 64-bit platforms")
	}
	if n := unsafe.Sizeof(Agent{}); n > 352 {
		t.Fatalf("Agent takes %d bytes, past the 352-byte size class", n)
	}
}
