package rootfile_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/rootfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func root(t *testing.T) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("text"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, r
}

// Contract K3: each opener takes what it is for and refuses the rest with
// a sentinel.
func TestK3_OpenersTakeOnlyTheirKind(t *testing.T) {
	dir, r := root(t)
	f, err := rootfile.Open(r, "file")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(data) != "text" {
		t.Fatalf("read %q, %v", data, err)
	}
	if _, err := rootfile.Open(r, "dir"); !errors.Is(err, rootfile.ErrNotRegular) {
		t.Fatalf("Open of a directory: %v", err)
	}
	if _, err := rootfile.Open(r, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
	d, err := rootfile.OpenDir(r, "dir")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := rootfile.OpenDir(r, "file"); !errors.Is(err, rootfile.ErrNotDir) {
		t.Fatalf("OpenDir of a file: %v", err)
	}
	for _, name := range []string{"file", "new"} {
		w, err := rootfile.Create(r, name, 0o600)
		if err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
		_, err = w.WriteString("new text")
		w.Close()
		if data, _ := os.ReadFile(filepath.Join(dir, name)); err != nil || string(data) != "new text" {
			t.Fatalf("Create %s wrote %q, %v", name, data, err)
		}
	}
	if _, err := rootfile.Create(r, "dir", 0o600); !errors.Is(err, rootfile.ErrNotRegular) {
		t.Fatalf("Create over a directory: %v", err)
	}
}
