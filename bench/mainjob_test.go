package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"
)

// fakeNode, when set in the environment, makes the test binary act as the
// node binary: `run ... -dir TREE` prints the survey line it would, from
// the files themselves. It lets the harness be tested without building the
// real node.
const fakeNode = "SUBACTOR_BENCH_FAKE_NODE"

func init() {
	if os.Getenv(fakeNode) == "" {
		return
	}
	tree := os.Args[len(os.Args)-1]
	var files, lines, size int64
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		files, size = files+1, size+int64(len(data))
		lines += int64(bytes.Count(data, []byte{'\n'}))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// As node run -json prints it: the session, then the result.
	answer, _ := json.Marshal(fmt.Sprintf("survey %s: %s files, %s lines, %s in 1 folder (0 delegated)\n- (top level): ...", tree, humanize.Comma(files), humanize.Comma(lines), humanize.IBytes(uint64(size))))
	fmt.Printf("{\"type\":\"node/session\",\"sessionId\":\"x\"}\n{\"type\":\"node/result\",\"sessionId\":\"x\",\"stopReason\":\"completed\",\"answer\":%s}\n", answer)
	os.Exit(0)
}

func TestMainJobHarness(t *testing.T) {
	t.Setenv(fakeNode, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := MainJob(context.Background(), self, t.TempDir(), 2<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.NodeFiles != r.Tree.Files || r.PipeBytes != r.Tree.Bytes || r.Tree.Files < 10 || r.Tree.Unterminated == 0 || !(r.Ratio > 0) ||
		!strings.HasPrefix(r.Answer, "survey ") {
		t.Fatalf("main job %+v", r)
	}
}

// The generated tree's totals are what walking it finds.
func TestGenerateTree(t *testing.T) {
	root := t.TempDir()
	want, err := GenerateTree(root, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got TreeTotals
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			got.Folders++
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			got.Files, got.Bytes = got.Files+1, got.Bytes+int64(len(data))
			got.Newlines += int64(bytes.Count(data, []byte{'\n'}))
			if len(data) > 0 && data[len(data)-1] != '\n' {
				got.Unterminated++
			}
			return err
		}
		return nil
	})
	if err != nil || got != want || want.Bytes != 1<<20 {
		t.Fatalf("walked %+v, %v; generated %+v", got, err, want)
	}
}
