package agent

import (
	"math/bits"
	"reflect"
	"testing"
)

// Every parked child is an Agent (issue 11): it stays within the 352-byte
// size class on 64-bit platforms (320 until its log fence, S8, took two
// words). What only some agents need (a delegating
// parent's side, a system prompt and output schema) is allocated apart.
func TestAgentSize(t *testing.T) {
	if bits.UintSize != 64 {
		t.Skip("size classes of 64-bit platforms")
	}
	if n := reflect.TypeFor[Agent]().Size(); n > 352 {
		t.Fatalf("Agent takes %d bytes, past the 352-byte size class", n)
	}
}
