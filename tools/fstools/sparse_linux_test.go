package fstools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// sparseFile makes a file of size bytes in a new directory with piece
// written at each offset and holes everywhere else, and returns the
// directory; it skips the test where the file system keeps no holes.
func sparseFile(t *testing.T, size int64, piece string, offsets ...int64) string {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, off := range offsets {
		if _, err := f.WriteAt([]byte(piece), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("no file of %d bytes here: %v", size, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Skipf("the file system stores the holes (%d blocks)", st.Blocks)
	}
	return root
}

// readBytes is how many bytes this process has read (rchar in
// /proc/self/io: every read and pread, whatever the file).
func readBytes(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io:\n%s", data)
	return 0
}

// Contract K3 (item 6 of issue 18): count on a 100 GiB sparse file reads
// its few blocks of data, not its holes, and gives the figures of reading
// it all: bytes is the size, the holes' zero bytes are words of their own
// between the pieces' newlines. Bounded by bytes read (the kernel's count
// and countFile's), not by time.
func TestK3_CountSkipsTheHolesOfASparseFile(t *testing.T) {
	const size = 100 << 30
	root := sparseFile(t, size, "\nalpha beta\n", 1<<30, 50<<30)
	// Three holes (words), two pieces of two words and two newlines each,
	// and a last line of zeros.
	want := counts{Path: "sparse", Lines: 5, Words: 7, Bytes: size}

	f, err := os.Open(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, read, err := countFile(context.Background(), f, size, maxCountBytes)
	got.Path = "sparse"
	if err != nil || got != want || read > 1<<20 {
		t.Fatalf("countFile: %+v after reading %d bytes, %v; want %+v after reading a few blocks", got, read, err, want)
	}

	ts, err := New(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if name := ts[2].Spec().Name; name != "count" {
		t.Fatalf("tool 2 is %s", name)
	}
	before := readBytes(t)
	out, err := ts[2].Call(context.Background(), nil, json.RawMessage(`{"path":"sparse"}`))
	read = readBytes(t) - before
	wantJSON, _ := json.Marshal(want)
	if err != nil || out != string(wantJSON) || read > 16<<20 {
		t.Fatalf("count: %s, %v after the process read %d bytes; want %s after a few blocks", out, err, read, wantJSON)
	}
}
