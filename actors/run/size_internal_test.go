package run

import (
	"testing"
	"unsafe"
)

// A parked child holds its run actor all its life, so its size is most of
// what the run costs a parked child (issue 11): the run's one allocation,
// with the allocator's 8-byte header for objects over 512 bytes, stays
// within the 576-byte size class on 64-bit platforms.
func TestRunActorSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("size classes of 64-bit platforms")
	}
	if n := unsafe.Sizeof(runActor{}) + 8; n > 576 {
		t.Fatalf("runActor takes %d bytes with its header, past the 576-byte size class", n)
	}
}
