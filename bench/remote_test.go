package bench

import (
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestRemoteMeasures runs the remote benchmark's harness at a small size:
// three processes on loopback, every delegation completing (K1, P4).
func TestRemoteMeasures(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "remotehost")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/remotehost").CombinedOutput(); err != nil {
		t.Fatalf("building remotehost: %v\n%s", err, out)
	}
	r, err := Remote(context.Background(), bin, 20, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Raw.Samples != 20 || r.Run.Samples != 20 || r.Ratio <= 0 || r.OneNode <= 0 || r.OneHost <= 0 || r.TwoHosts <= 0 ||
		r.OneNodeCPU <= 0 || r.OneHostCPU <= 0 || r.TwoHostsCPU <= 0 {
		t.Fatalf("result %+v", r)
	}
	t.Logf("%+v", r)
}

// procCPU reads from /proc what getrusage says of the same process, to
// its clock tick.
func TestProcCPUReadsWhatGetrusageSays(t *testing.T) {
	for x := 0; CPUTime(syscall.RUSAGE_SELF) < 200*time.Millisecond; x++ {
		_ = sha256.Sum256([]byte(strconv.Itoa(x)))
	}
	before := CPUTime(syscall.RUSAGE_SELF)
	got, err := procCPU(os.Getpid())
	after := CPUTime(syscall.RUSAGE_SELF)
	if err != nil {
		t.Fatal(err)
	}
	if tick := 10 * time.Millisecond; got < before-2*tick || got > after+tick {
		t.Fatalf("procCPU %v, getrusage %v to %v", got, before, after)
	}
}

// TestRemoteMemoryMeasures runs the remote memory measurement at a small
// size: every run starts and is disposed, and the figures are read.
func TestRemoteMemoryMeasures(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "remotehost")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/remotehost").CombinedOutput(); err != nil {
		t.Fatalf("building remotehost: %v\n%s", err, out)
	}
	r, err := RemoteMemory(context.Background(), bin, 200)
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs != 200 || r.BeforeBytes <= 0 || r.LoadedBytes <= 0 || r.AfterBytes <= 0 || r.AfterRatio <= 0 {
		t.Fatalf("result %+v", r)
	}
	t.Logf("%+v", r)
}
