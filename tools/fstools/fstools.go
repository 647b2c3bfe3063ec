package fstools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/internal/rootfile"
)

// defaultMaxBytes is how much read returns when maxBytes is not given.
const defaultMaxBytes = 64 << 10

// maxReadBytes bounds maxBytes so that one call cannot pull a huge file
// into memory.
const maxReadBytes = 1 << 20

// Options say how New's tools show the root.
type Options struct {
	// Name is what the model calls the root, as a user gave it
	// ("/srv/data", "../src"): Name and paths below it reach the root,
	// so a task can say "survey /srv/data" and the tools follow.
	// Relative paths ("." among them) are relative to the root either
	// way, since a model told the task by a peer cannot know Name; one
	// that starts with Name is read as below Name. The tools reach
	// nothing outside root.
	Name string
	// VCS lists version control folders (.git, .hg, .svn, .jj); list
	// leaves them out by default, so that a survey counts the work, not
	// its history.
	VCS bool
}

// New returns the list, read and count tools confined to the directory
// root.
func New(root string, o Options) ([]agent.Tool, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	// Fail now on a root that cannot be opened rather than on every call.
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	r.Close()
	name := path.Clean(filepath.ToSlash(cmp.Or(o.Name, ".")))
	return []agent.Tool{
		&tool{root: abs, name: name, run: lister(o.VCS), spec: spec("list", listDescription, name, true, `,"offset":{"type":"integer","minimum":0}`)},
		&tool{root: abs, name: name, run: read, spec: spec("read", readDescription, name, false, `,"maxBytes":{"type":"integer","minimum":1,"maximum":1048576}`)},
		&tool{root: abs, name: name, run: count, spec: spec("count", countDescription, name, false, "")},
	}, nil
}

// maxListEntries is the most entries one list call returns: a directory
// of 300,000 entries would otherwise be one answer of 15 MB, kept whole in
// the conversation of the agent that asked. offset pages through the rest.
const maxListEntries = 10000

// The tools' descriptions.
var (
	listDescription = fmt.Sprintf(`List a directory. Returns JSON {"entries":[{"name","type","size"}...]} sorted by name; type is "dir", "file", "symlink" or "other"; size is given for files. `+
		`At most %d entries, from offset (default 0): when more follow, the JSON also has "truncated":true, "total" (the directory's entries) and "next" (the offset of the rest).`, maxListEntries)
	readDescription  = "Read a file's text, truncated to maxBytes (default 65536, at most 1048576)."
	countDescription = `Count a file's lines, words and bytes. Returns JSON {"path","lines","words","bytes"}. Given a directory, counts the regular files directly in it (not below) in one call, lines and bytes only: {"path","files","lines","bytes"}, with "unreadable" (how many could not be opened or read) when some could not. The holes of a sparse file count as zero bytes without being read. At most 1 GiB of data is read per call: past that the JSON has "truncated":true, and lines (and words) are those of the first "counted" bytes (bytes is still the full size).`
)

// spec is a tool's spec: its required path parameter, described under the
// root's name (a directory's when dir is set), and the properties more.
func spec(tool, description, name string, dir bool, more string) agent.ToolSpec {
	var d string
	switch {
	case name == "." && dir:
		d = `relative slash-separated path; "." is the root`
	case name == ".":
		d = "relative slash-separated path"
	default:
		d = fmt.Sprintf("slash-separated path: %q (the root) or below it, or relative to the root (\".\" is the root)", name)
	}
	b, _ := json.Marshal(d) // a string always marshals
	return agent.ToolSpec{
		Name:        tool,
		Description: description,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":` + string(b) + `}` + more + `},"required":["path"],"additionalProperties":false}`),
	}
}

// tool opens the root for each call: the tools hold no descriptor between
// calls and need no Close.
type tool struct {
	root string
	name string // what the model calls the root
	spec agent.ToolSpec
	run  func(ctx context.Context, r *os.Root, local func(string) (string, error), args json.RawMessage) (string, error)
}

func (t *tool) Spec() agent.ToolSpec { return t.spec }

func (t *tool) Call(ctx context.Context, _ *agent.Agent, args json.RawMessage) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err // a cancelled run touches no more files
	}
	r, err := os.OpenRoot(t.root)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	defer r.Close()
	out, err := t.run(ctx, r, t.local, args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	return out, nil
}

// Recover implements agent.Recoverer: the tools only read, so a call that
// an earlier process left without a result is made again (S9).
func (t *tool) Recover(ctx context.Context, a *agent.Agent, args json.RawMessage) (string, error) {
	return t.Call(ctx, a, args)
}

// pathArgs are the arguments every tool takes.
type pathArgs struct {
	Path string `json:"path"`
}

// decode parses args strictly into v (K3): the error wraps the
// *jsonv2.Error saying what is wrong where.
func decode(args json.RawMessage, v any) error {
	if err := jsonv2.Unmarshal(args, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// local checks a model-supplied path and turns it into one os.Root accepts.
// A relative path is relative to the root, whatever Name says: a peer
// that asks a cluster node to "survey ." cannot know the directory that
// node serves. With a Name, the Name itself and paths below it (as the
// user gave it, absolute or not) reach the root too; a relative path that
// starts with the Name is read as below the Name. An absolute path
// elsewhere and a path climbing out with ".." are refused. os.Root
// refuses escapes through symbolic links; the lexical checks here give a
// clearer message for the common cases.
func (t *tool) local(p string) (string, error) {
	if p == "" {
		return "", errors.New(`missing "path"`)
	}
	if t.name != "." {
		// Strip the name to a path relative to the root.
		clean := path.Clean(p)
		switch rel, below := strings.CutPrefix(clean, strings.TrimSuffix(t.name, "/")+"/"); {
		case clean == t.name:
			return ".", nil
		case below:
			p = rel
		case path.IsAbs(p) || filepath.IsAbs(p):
			return "", fmt.Errorf("path %q is outside the root %q", p, t.name)
		}
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is absolute; paths are relative to the root", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q is outside the root", p)
	}
	return filepath.FromSlash(clean), nil
}

// openPath checks p and opens it under r, which must find a directory when
// dir is set and a regular file otherwise, without waiting on a FIFO.
func openPath(r *os.Root, local func(string) (string, error), p string, dir bool) (*os.File, error) {
	name, err := local(p)
	if err != nil {
		return nil, err
	}
	open := rootfile.Open
	if dir {
		open = rootfile.OpenDir
	}
	f, err := open(r, name)
	if errors.Is(err, rootfile.ErrNotRegular) || errors.Is(err, rootfile.ErrNotDir) {
		return nil, fmt.Errorf("%q is %w", p, err)
	}
	return f, err
}

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size *int64 `json:"size,omitempty"`
}

type listArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
}

// listing is the result of list.
type listing struct {
	Entries []entry `json:"entries"`
	// Set when entries follow past this call's maxListEntries.
	Truncated bool `json:"truncated,omitempty"`
	Total     int  `json:"total,omitempty"`
	Next      int  `json:"next,omitempty"`
}

// vcsFolders are the version control folders list leaves out unless asked.
var vcsFolders = []string{".git", ".hg", ".svn", ".jj"}

// lister is the list tool's run, which lists vcsFolders only with vcs.
func lister(vcs bool) func(context.Context, *os.Root, func(string) (string, error), json.RawMessage) (string, error) {
	return func(ctx context.Context, r *os.Root, local func(string) (string, error), raw json.RawMessage) (string, error) {
		return list(ctx, r, local, raw, vcs)
	}
}

func list(_ context.Context, r *os.Root, local func(string) (string, error), raw json.RawMessage, vcs bool) (string, error) {
	var args listArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	if args.Offset < 0 {
		return "", fmt.Errorf("offset %d is negative", args.Offset)
	}
	f, err := openPath(r, local, args.Path, true)
	if err != nil {
		return "", err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return "", err
	}
	if !vcs {
		des = slices.DeleteFunc(des, func(de fs.DirEntry) bool { return de.IsDir() && slices.Contains(vcsFolders, de.Name()) })
	}
	// File.ReadDir returns directory order; the model gets a stable one,
	// so that offsets page through it.
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out listing
	total := len(des)
	des = des[min(args.Offset, total):]
	if len(des) > maxListEntries {
		out.Truncated, out.Total, out.Next = true, total, args.Offset+maxListEntries
		des = des[:maxListEntries]
	}
	out.Entries = make([]entry, 0, len(des))
	for _, de := range des {
		e := entry{Name: de.Name()}
		switch t := de.Type(); {
		case t.IsDir():
			e.Type = "dir"
		case t.IsRegular():
			e.Type = "file"
			info, err := de.Info()
			if err != nil {
				return "", err
			}
			size := info.Size()
			e.Size = &size
		case t&fs.ModeSymlink != 0:
			e.Type = "symlink"
		default:
			e.Type = "other"
		}
		out.Entries = append(out.Entries, e)
	}
	b, err := json.Marshal(out)
	return string(b), err
}

type readArgs struct {
	Path     string `json:"path"`
	MaxBytes int    `json:"maxBytes"`
}

func read(_ context.Context, r *os.Root, local func(string) (string, error), raw json.RawMessage) (string, error) {
	var args readArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	switch {
	case args.MaxBytes == 0:
		args.MaxBytes = defaultMaxBytes
	case args.MaxBytes < 0 || args.MaxBytes > maxReadBytes:
		return "", fmt.Errorf("maxBytes %d is not between 1 and %d", args.MaxBytes, maxReadBytes)
	}
	f, err := openPath(r, local, args.Path, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(args.MaxBytes)))
	return string(b), err
}

// counts is the result of count.
type counts struct {
	Path  string `json:"path"`
	Lines int64  `json:"lines"`
	Words int64  `json:"words"`
	Bytes int64  `json:"bytes"`
	// Truncated says the count stopped after maxCountBytes of data: Lines
	// and Words are those of the first Counted bytes, Bytes the file's
	// size.
	Truncated bool  `json:"truncated,omitempty"`
	Counted   int64 `json:"counted,omitempty"`
}

func count(ctx context.Context, r *os.Root, local func(string) (string, error), raw json.RawMessage) (string, error) {
	var args pathArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	f, err := openPath(r, local, args.Path, false)
	if errors.Is(err, rootfile.ErrNotRegular) {
		if name, _ := local(args.Path); isDir(r, name) {
			return countDir(ctx, r, name, path.Clean(args.Path), maxCountBytes)
		}
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	c, _, err := countFile(ctx, f, fi.Size(), maxCountBytes)
	if err != nil {
		return "", err
	}
	c.Path = path.Clean(args.Path)
	out, err := json.Marshal(c)
	return string(out), err
}

func isDir(r *os.Root, name string) bool {
	fi, err := r.Stat(name)
	return err == nil && fi.IsDir()
}

// dirCounts is the result of count on a directory.
type dirCounts struct {
	Path  string `json:"path"`
	Files int64  `json:"files"`
	Lines int64  `json:"lines"`
	Bytes int64  `json:"bytes"`
	// Truncated says the call stopped reading after maxCountBytes: Lines
	// are those of the first Counted bytes, Bytes the files' full size.
	Truncated bool  `json:"truncated,omitempty"`
	Counted   int64 `json:"counted,omitempty"`
	// Unreadable counts the regular files that could not be opened or
	// read; they are in no other figure.
	Unreadable int64 `json:"unreadable,omitempty"`
}

// dirBatch is how many entries countDir reads at a time, so that a huge
// directory costs it no more memory than a small one.
const dirBatch = 256

// countDir counts the lines and bytes of the regular files directly in the
// directory name under r, reading at most limit bytes of data in all:
// past that, files add their size but no lines (which ones did depends on
// the directory's order). It opens the directory once, as a root of its
// own, so that each file is one name below it, not a path walked again.
func countDir(ctx context.Context, r *os.Root, name, shown string, limit int64) (string, error) {
	sub, err := r.OpenRoot(name)
	if err != nil {
		return "", err
	}
	defer sub.Close()
	d, err := rootfile.OpenDir(sub, ".")
	if err != nil {
		return "", err
	}
	defer d.Close()
	out := dirCounts{Path: shown}
	budget := limit
	for {
		des, rerr := d.ReadDir(dirBatch)
		for _, de := range des {
			if !de.Type().IsRegular() {
				continue
			}
			c, read, err := countOne(ctx, sub, de.Name(), budget)
			switch {
			case ctx.Err() != nil:
				return "", ctx.Err()
			case errors.Is(err, rootfile.ErrNotRegular) || errors.Is(err, fs.ErrNotExist):
				continue // replaced or removed since it was listed
			case err != nil:
				out.Unreadable++
				continue
			}
			budget -= read
			out.Files++
			out.Lines += c.Lines
			out.Bytes += c.Bytes
			if c.Truncated {
				out.Truncated = true
				out.Counted += c.Counted
			} else {
				out.Counted += c.Bytes
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", rerr
		}
	}
	if !out.Truncated {
		out.Counted = 0
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// countOne counts the lines and bytes of the regular file name under r,
// reading at most limit bytes of its data.
func countOne(ctx context.Context, r *os.Root, name string, limit int64) (counts, int64, error) {
	f, fi, err := rootfile.OpenInfo(r, name)
	if err != nil {
		return counts{}, 0, err
	}
	defer f.Close()
	return countData(ctx, f, fi.Size(), limit, false)
}
