package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/await"
	"github.com/subactor/subactor/tools/fstools"
)

// Contract K3 (item 9 of issue 18): a folder of 50,000 entries costs the
// survey one page of list (fstools.MaxListEntries) and no more: the
// node's peak RSS stays under 120 MB (measured: about 60 MB; without the
// cap 170 MB, about 3 KB more per entry), and the answer says what was
// cut.
func TestK3_SurveyOfAHugeFolderIsCutAndBounded(t *testing.T) {
	const n = 5 * fstools.MaxListEntries
	const ceiling = 120 << 20
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
	cmd := exec.CommandContext(await.Ctx(t), bin, "run", "-quiet")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), envDataDir+"="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v, stderr:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("\n- cut: huge: listed %d of %d entries\n", fstools.MaxListEntries, n)
	if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), fmt.Sprintf("- huge: %d files,", fstools.MaxListEntries)) {
		t.Errorf("the answer does not say the listing was cut (%q):\n%s", want, stdout.String())
	}
	if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > ceiling {
		t.Errorf("peak RSS %d MB surveying %d entries, want at most %d MB", rss>>20, n, ceiling>>20)
	}
}
