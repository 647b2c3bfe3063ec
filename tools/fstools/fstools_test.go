package fstools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/tools/fstools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree writes files (slash paths → content) under a new temp dir.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unsupported: %v", err)
	}
}

func tools(t *testing.T, root string) map[string]agent.Tool {
	t.Helper()
	ts, err := fstools.New(root, fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]agent.Tool{}
	for _, tool := range ts {
		out[tool.Spec().Name] = tool
	}
	return out
}

func callTool(t *testing.T, tool agent.Tool, args string) (string, error) {
	t.Helper()
	return tool.Call(t.Context(), nil, json.RawMessage(args))
}

func mustCall(t *testing.T, tool agent.Tool, args string) string {
	t.Helper()
	out, err := callTool(t, tool, args)
	if err != nil {
		t.Fatalf("%s %s: %v", tool.Spec().Name, args, err)
	}
	return out
}

func TestNew(t *testing.T) {
	ts := tools(t, t.TempDir())
	if len(ts) != 3 || ts["list"] == nil || ts["read"] == nil || ts["count"] == nil {
		t.Fatalf("tools %v", ts)
	}
	for _, tool := range ts {
		var schema map[string]any
		if err := json.Unmarshal(tool.Spec().Parameters, &schema); err != nil || tool.Spec().Description == "" {
			t.Errorf("%s: bad spec: %v", tool.Spec().Name, err)
		}
	}
	if _, err := fstools.New(filepath.Join(t.TempDir(), "missing"), fstools.Options{}); err == nil {
		t.Fatal("New accepted a missing root")
	}
}

func TestList(t *testing.T) {
	root := tree(t, map[string]string{"b.txt": "hello", "a/x.go": "package a\n", "empty": ""})
	symlink(t, "a", filepath.Join(root, "l"))
	ts := tools(t, root)
	want := `{"entries":[{"name":"a","type":"dir"},{"name":"b.txt","type":"file","size":5},{"name":"empty","type":"file","size":0},{"name":"l","type":"symlink"}]}`
	for _, p := range []string{".", "./", "a/..", "l/.."} {
		if got := mustCall(t, ts["list"], fmt.Sprintf(`{"path":%q}`, p)); got != want {
			t.Fatalf("list %q:\n got %s\nwant %s", p, got, want)
		}
	}
	// A symlink that stays inside the root is followed.
	if got := mustCall(t, ts["list"], `{"path":"l"}`); got != `{"entries":[{"name":"x.go","type":"file","size":10}]}` {
		t.Fatalf("list l: %s", got)
	}
	if _, err := callTool(t, ts["list"], `{"path":"b.txt"}`); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("list of a file: %v", err)
	}
	if _, err := callTool(t, ts["list"], `{"path":"nope"}`); err == nil {
		t.Fatal("list of a missing path succeeded")
	}
}

// Contract K3 (item 9 of issue 18): list returns at most MaxListEntries
// entries a call and says when it cut (truncated, the total, the offset
// of the rest); offset pages through the rest, in name order, and a
// hostile offset is refused or lists nothing.
func TestK3_ListIsCappedAndPages(t *testing.T) {
	root := t.TempDir()
	const n = fstools.MaxListEntries + 5
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := tools(t, root)
	type listing struct {
		Entries []struct {
			Name string `json:"name"`
		} `json:"entries"`
		Truncated bool `json:"truncated"`
		Total     int  `json:"total"`
		Next      int  `json:"next"`
	}
	page := func(args string) listing {
		t.Helper()
		var l listing
		if err := json.Unmarshal([]byte(mustCall(t, ts["list"], args)), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := page(`{"path":"."}`)
	if len(first.Entries) != fstools.MaxListEntries || !first.Truncated || first.Total != n || first.Next != fstools.MaxListEntries ||
		first.Entries[0].Name != "f00000" || first.Entries[len(first.Entries)-1].Name != fmt.Sprintf("f%05d", fstools.MaxListEntries-1) {
		t.Fatalf("first page: %d entries, truncated %v, total %d, next %d", len(first.Entries), first.Truncated, first.Total, first.Next)
	}
	rest := page(fmt.Sprintf(`{"path":".","offset":%d}`, first.Next))
	if len(rest.Entries) != 5 || rest.Truncated || rest.Entries[0].Name != fmt.Sprintf("f%05d", fstools.MaxListEntries) {
		t.Fatalf("the rest: %+v", rest)
	}
	if got := mustCall(t, ts["list"], `{"path":".","offset":9223372036854775807}`); got != `{"entries":[]}` {
		t.Fatalf("an offset past the end: %s", got)
	}
	if _, err := callTool(t, ts["list"], `{"path":".","offset":-1}`); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("a negative offset: %v", err)
	}
}

func TestRead(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 5000) // 80000 bytes
	root := tree(t, map[string]string{"a/x.go": "package a\n", "big": big})
	ts := tools(t, root)
	for _, c := range []struct{ args, want string }{
		{`{"path":"a/x.go"}`, "package a\n"},
		{`{"path":"a/x.go","maxBytes":4}`, "pack"},
		{`{"path":"big"}`, big[:fstools.DefaultMaxBytes]},
		{`{"path":"big","maxBytes":70000}`, big[:70000]},
	} {
		if got := mustCall(t, ts["read"], c.args); got != c.want {
			t.Errorf("read %s: got %d bytes %.20q, want %d bytes", c.args, len(got), got, len(c.want))
		}
	}
	if _, err := callTool(t, ts["read"], `{"path":"a"}`); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("read of a directory: %v", err)
	}
}

func TestCount(t *testing.T) {
	contents := map[string]string{
		"empty":     "",
		"newline":   "\n",
		"one":       "a",
		"one-eol":   "a\n",
		"no-eol":    "one two\nthree",
		"blank":     "\n\n\n",
		"spaces":    "  lead \t trail  \r\n",
		"unicode":   "\u00a0x\u2003y\u3000z ü\n",
		"invalid":   "\xff \xfe\xfd\nq\x80",
		"multiline": "package a\n\nfunc X() {}\n",
	}
	root := tree(t, map[string]string{})
	for name, content := range contents {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := tools(t, root)
	for name, content := range contents {
		// The expected figures, computed the obvious non-streaming way.
		lines := bytes.Count([]byte(content), []byte("\n"))
		if content != "" && !strings.HasSuffix(content, "\n") {
			lines++
		}
		want := fmt.Sprintf(`{"path":%q,"lines":%d,"words":%d,"bytes":%d}`, name, lines, len(strings.Fields(content)), len(content))
		if got := mustCall(t, ts["count"], fmt.Sprintf(`{"path":"./%s"}`, name)); got != want {
			t.Errorf("count %s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// A count of a directory counts the regular files directly in it, lines
// and bytes, in one call: not its sub-directories' files, not symbolic
// links, not what is not a regular file.
func TestCountOfADirectory(t *testing.T) {
	root := tree(t, map[string]string{
		"a/x.go":    "package a\n",
		"a/y.txt":   "one\ntwo",
		"a/empty":   "",
		"a/sub/z":   "not\ncounted\n",
		"top.txt":   "1\n2\n",
		"b/sub/w.c": "x",
	})
	symlink(t, "x.go", filepath.Join(root, "a", "l"))
	ts := tools(t, root)
	for args, want := range map[string]string{
		`{"path":"a"}`:    `{"path":"a","files":3,"lines":3,"bytes":17}`,
		`{"path":"./a/"}`: `{"path":"a","files":3,"lines":3,"bytes":17}`,
		`{"path":"."}`:    `{"path":".","files":1,"lines":2,"bytes":4}`,
		`{"path":"b"}`:    `{"path":"b","files":0,"lines":0,"bytes":0}`,
	} {
		if got := mustCall(t, ts["count"], args); got != want {
			t.Errorf("count %s:\n got %s\nwant %s", args, got, want)
		}
	}
}

func TestCountStopsWhenCancelled(t *testing.T) {
	root := tree(t, map[string]string{"big": strings.Repeat("word ", 1<<15)})
	ts := tools(t, root)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ts["count"].Call(ctx, nil, json.RawMessage(`{"path":"big"}`)); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("count with a cancelled context: %v", err)
	}
}

// TestK3_HostileArguments: tool arguments come from a model and are refused
// unless they are exactly one object with known, well-typed fields.
// Contract K3.
func TestK3_HostileArguments(t *testing.T) {
	root := tree(t, map[string]string{"a/x.go": "package a\n"})
	ts := tools(t, root)
	common := map[string]string{
		`{"path":"a","recursive":true}`: `unknown key "recursive"`,
		`{"Path":"a"}`:                  `unknown key "Path"`,
		`{"path":"b","path":"a"}`:       `key "path" is given twice`,
		`{"path":3}`:                    "a JSON number at /path, where a string belongs",
		`{"path":["a"]}`:                "a JSON array at /path, where a string belongs",
		`{}`:                            `missing "path"`,
		`null`:                          "null at the top level",
		`{"path":null}`:                 "null at /path",
		`{"path":""}`:                   `missing "path"`,
		`[]`:                            "a JSON array at the top level, where an object belongs",
		`"a"`:                           "a JSON string at the top level, where an object belongs",
		`{"path":"a"} {"path":"b"}`:     "invalid arguments: not valid JSON",
		`{"path":`:                      "invalid arguments",
		``:                              "invalid arguments",
	}
	for name, tool := range ts {
		for args, want := range common {
			_, err := callTool(t, tool, args)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), name+": ") {
				t.Errorf("%s %s: got %v, want an error containing %q", name, args, err, want)
			}
		}
	}
	for args, want := range map[string]string{
		`{"path":"a/x.go","maxBytes":-1}`:      "not between",
		`{"path":"a/x.go","maxBytes":2097152}`: "not between",
		`{"path":"a/x.go","maxBytes":"10"}`:    "a JSON string at /maxBytes, where an integer belongs",
		`{"path":"a/x.go","maxBytes":1.5}`:     "invalid arguments",
	} {
		if _, err := callTool(t, ts["read"], args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read %s: got %v, want an error containing %q", args, err, want)
		}
	}
}

// TestK3_EscapesAreRefused: no path, however spelled, reaches outside the
// root, including through symbolic links.
// Contract K3.
func TestK3_EscapesAreRefused(t *testing.T) {
	outside := tree(t, map[string]string{"secret": "top secret\n"})
	root := tree(t, map[string]string{"a/x.go": "package a\n"})
	symlink(t, filepath.Join(outside, "secret"), filepath.Join(root, "out"))
	symlink(t, outside, filepath.Join(root, "outdir"))
	symlink(t, "../../", filepath.Join(root, "a", "up"))
	ts := tools(t, root)
	for _, c := range []struct{ path, why string }{
		{"../x", "outside the root"},
		{"a/../../x", "outside the root"},
		{"..", "outside the root"},
		{"/etc/passwd", "absolute"},
		{"out", "escapes"},
		{"outdir/secret", "escapes"},
		{"a/up/x", "escapes"},
	} {
		for _, name := range []string{"list", "read", "count"} {
			out, err := callTool(t, ts[name], fmt.Sprintf(`{"path":%q}`, c.path))
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s %q: got %q, %v; want an error containing %q", name, c.path, out, err, c.why)
			}
		}
	}
	// The symlinks still show up in a listing, without being followed.
	if got := mustCall(t, ts["list"], `{"path":"."}`); got != `{"entries":[{"name":"a","type":"dir"},{"name":"out","type":"symlink"},{"name":"outdir","type":"symlink"}]}` {
		t.Fatalf("list: %s", got)
	}
}

func TestToolsTouchNoFileOnceCancelled(t *testing.T) {
	tools, err := fstools.New(t.TempDir(), fstools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tool := range tools {
		if _, err := tool.Call(ctx, nil, json.RawMessage(`{"path":"."}`)); !errors.Is(err, context.Canceled) {
			t.Errorf("%s after cancel: %v", tool.Spec().Name, err)
		}
	}
}

// FuzzK3_ToolArgumentsStayInsideTheRoot feeds arbitrary arguments to every
// tool: each answers or fails cleanly, and nothing outside the root is ever
// read back.
func FuzzK3_ToolArgumentsStayInsideTheRoot(f *testing.F) {
	for _, seed := range []string{
		`{"path":"."}`, `{"path":"inside.txt"}`, `{"path":"../outside.txt"}`, `{"path":"/etc/passwd"}`,
		`{"path":"link"}`, `{"path":"inside.txt","maxBytes":3}`, `{"path":"a\u0000b"}`, `{}`, `[`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	parent := f.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		f.Fatal(err)
	}
	const secret = "OUTSIDE-SECRET"
	if err := os.WriteFile(filepath.Join(parent, "outside.txt"), []byte(secret), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(parent, "outside.txt"), filepath.Join(root, "link")); err != nil {
		f.Fatal(err)
	}
	tools, err := fstools.New(root, fstools.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, tool := range tools {
			out, err := tool.Call(context.Background(), nil, args)
			if strings.Contains(out, secret) || (err != nil && strings.Contains(err.Error(), secret)) {
				t.Fatalf("%s(%q) read outside the root: %q, %v", tool.Spec().Name, args, out, err)
			}
		}
	})
}

// TestK3_NamedRootTakesItsNameAndRelativePaths: with Options.Name the
// model names the root as the user gave it, and relative paths ("." among
// them) are still relative to the root, since a peer asking a cluster node
// to "survey ." cannot know the directory that node serves (issue 27: a
// node started with `serve -dir /some/root` answered `path "." is outside
// the root`). Absolute paths elsewhere and ".." escapes are refused.
// Contract K3 (and N1, whose survey names the directory given by -dir).
func TestK3_NamedRootTakesItsNameAndRelativePaths(t *testing.T) {
	root := tree(t, map[string]string{"a/x.go": "package a\n"})
	for _, name := range []string{root, "../some dir", "data"} {
		ts, err := fstools.New(root, fstools.Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]agent.Tool{}
		for _, tool := range ts {
			byName[tool.Spec().Name] = tool
			var params struct {
				Properties struct {
					Path struct{ Description string } `json:"path"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(tool.Spec().Parameters, &params); err != nil ||
				!strings.Contains(params.Properties.Path.Description, fmt.Sprintf("%q (the root)", name)) {
				t.Errorf("%s: parameters %s do not name the root %q (%v)", tool.Spec().Name, tool.Spec().Parameters, name, err)
			}
		}
		const rootListing = `{"entries":[{"name":"a","type":"dir"}]}`
		for _, p := range []string{name, name + "/", ".", "./", "a/.."} {
			if got, err := callTool(t, byName["list"], fmt.Sprintf(`{"path":%q}`, p)); err != nil || got != rootListing {
				t.Errorf("%s: list %q = %s, %v; want the root", name, p, got, err)
			}
		}
		for _, p := range []string{name + "/a/x.go", "a/x.go", "./a/x.go"} {
			if got, err := callTool(t, byName["count"], fmt.Sprintf(`{"path":%q}`, p)); err != nil || !strings.Contains(got, `"lines":1`) {
				t.Errorf("%s: count %q = %s, %v", name, p, got, err)
			}
		}
		if got, err := callTool(t, byName["list"], `{"path":"a"}`); err != nil || got != `{"entries":[{"name":"x.go","type":"file","size":10}]}` {
			t.Errorf("%s: list a = %s, %v", name, got, err)
		}
		for _, p := range []string{"..", "../a", "a/../../x", name + "/../../x", "/etc/passwd", filepath.Dir(root), filepath.Join(filepath.Dir(root), "a")} {
			for tn, tool := range byName {
				if out, err := callTool(t, tool, fmt.Sprintf(`{"path":%q}`, p)); err == nil || !strings.Contains(err.Error(), "outside the root") {
					t.Errorf("%s: %s %q = %q, %v; want outside the root", name, tn, p, out, err)
				}
			}
		}
	}
}

// list leaves version control folders out unless Options.VCS asks for
// them: a survey counts the work, not its history. A file of the same
// name is listed.
func TestListSkipsVCSFoldersUnlessAsked(t *testing.T) {
	root := tree(t, map[string]string{".git/HEAD": "ref", ".hg/x": "", ".svn/x": "", ".jj/x": "", "src/a.go": "package a", ".gitignore": "x", "sub/.git": "gitdir: elsewhere"})
	names := func(vcs bool, dir string) []string {
		ts, err := fstools.New(root, fstools.Options{VCS: vcs})
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Entries []struct{ Name string } }
		if err := json.Unmarshal([]byte(mustCall(t, ts[0], `{"path":"`+dir+`"}`)), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range l.Entries {
			out = append(out, e.Name)
		}
		return out
	}
	if got, want := names(false, "."), []string{".gitignore", "src", "sub"}; !slices.Equal(got, want) {
		t.Errorf("list without VCS: %q, want %q", got, want)
	}
	if got, want := names(false, "sub"), []string{".git"}; !slices.Equal(got, want) {
		t.Errorf("list of a folder with a .git file: %q, want %q", got, want)
	}
	if got, want := names(true, "."), []string{".git", ".gitignore", ".hg", ".jj", ".svn", "src", "sub"}; !slices.Equal(got, want) {
		t.Errorf("list with VCS: %q, want %q", got, want)
	}
}
