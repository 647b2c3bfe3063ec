package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/subactor/subactor/internal/testkit"
)

// Contract K3 (item 9 of issue 18): a folder of 50,000 entries costs the
// survey one page of list (listPage entries, as the list tool's description
// says) and no more: the
// node's peak live heap stays under 40 MB (measured: 18 MB; it was 60 MB
// resident, 170 MB without the cap, about 3 KB more per entry), and the
// answer says what was cut. Its files are all counted still: one count of the folder reads its
// entries a batch at a time.
func TestK3_SurveyOfAHugeFolderIsCutAndBounded(t *testing.T) {
	const listPage = 10000
	const n = 5 * listPage
	const ceiling = 40 // MB
	root := t.TempDir()
	huge := filepath.Join(root, "huge")
	if err := os.Mkdir(huge, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f, err := os.Create(filepath.Join(huge, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// Creating and surveying 50,000 files takes a while under the race
	// detector on a loaded machine: a deadline of its own.
	ctx, cancel := context.WithTimeout(t.Context(), testkit.Scale(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "-quiet")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), envDataDir+"="+t.TempDir(), "GODEBUG=gctrace=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v, stderr:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("\n- cut: huge: listed %d of %d entries\n", listPage, n)
	if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), fmt.Sprintf("- huge: %s files,", humanize.Comma(n))) {
		t.Errorf("the answer does not say the listing was cut (%q):\n%s", want, stdout.String())
	}
	if live := peakLive(t, stderr.Bytes()); live > ceiling {
		t.Errorf("peak live heap %d MB surveying %d entries, want at most %d MB", live, n, ceiling)
	}
}

// Contract K3 (item 9 of issue 18): a store file open to other users is
// the node's own, so it is made private (0600); a data directory other
// users can write to (and so replace the store) may be the user's choice,
// so it is kept as it is and every command that opens it to write warns
// on stderr (sessions and tasks only read: they change nothing); one they
// can only list gets no warning.
func TestK3_DataOpenToOthersIsTightenedOrWarned(t *testing.T) {
	data := t.TempDir()
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	withData := []string{envDataDir + "=" + data}
	if _, stderr, code := nodeEnv(t, writeTree(t), withData, "run", "-quiet"); code != 0 || stderr != "" {
		t.Fatalf("a data directory others can list: exit %d, stderr %q", code, stderr)
	}
	store := filepath.Join(data, storeFile)
	for _, args := range [][]string{{"run", "-quiet"}, {"run", "-quiet"}} {
		if err := os.Chmod(store, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(data, 0o777); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := nodeEnv(t, writeTree(t), withData, args...)
		warning := fmt.Sprintf("warning: other users can write to data directory %q (mode 0777)", data)
		if code != 0 || !strings.Contains(stderr, warning) {
			t.Errorf("%v: exit %d, stderr %q; want a warning %q", args, code, stderr, warning)
		}
		for path, want := range map[string]os.FileMode{store: 0o600, data: 0o777} {
			if fi, err := os.Stat(path); err != nil {
				t.Error(err)
			} else if fi.Mode().Perm() != want {
				t.Errorf("%v: %s has mode %04o, want %04o", args, path, fi.Mode().Perm(), want)
			}
		}
	}
}
