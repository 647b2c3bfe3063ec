package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
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
	if r.Raw.Samples != 20 || r.Run.Samples != 20 || r.Ratio <= 0 || r.OneNode <= 0 || r.OneHost <= 0 || r.TwoHosts <= 0 {
		t.Fatalf("result %+v", r)
	}
	t.Logf("%+v", r)
}
