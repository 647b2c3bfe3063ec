package fstools

import (
	"bufio"
	"bytes"
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
	"unicode"

	"github.com/subactor/subactor/agent"
)

// DefaultMaxBytes is how much read returns when maxBytes is not given.
const DefaultMaxBytes = 64 << 10

// maxReadBytes bounds maxBytes so that one call cannot pull a huge file
// into memory.
const maxReadBytes = 1 << 20

// New returns the list, read and count tools confined to the directory root.
func New(root string) ([]agent.Tool, error) {
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
	return []agent.Tool{
		&tool{root: abs, spec: listSpec, run: list},
		&tool{root: abs, spec: readSpec, run: read},
		&tool{root: abs, spec: countSpec, run: count},
	}, nil
}

var (
	listSpec = agent.ToolSpec{
		Name:        "list",
		Description: `List a directory. Returns a JSON array sorted by name of {"name","type","size"}; type is "dir", "file", "symlink" or "other"; size is given for files.`,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative slash-separated path; \".\" is the root"}},"required":["path"],"additionalProperties":false}`),
	}
	readSpec = agent.ToolSpec{
		Name:        "read",
		Description: "Read a file's text, truncated to maxBytes (default 65536, at most 1048576).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative slash-separated path"},"maxBytes":{"type":"integer","minimum":1,"maximum":1048576}},"required":["path"],"additionalProperties":false}`),
	}
	countSpec = agent.ToolSpec{
		Name:        "count",
		Description: `Count a file's lines, words and bytes. Returns JSON {"path","lines","words","bytes"}.`,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative slash-separated path"}},"required":["path"],"additionalProperties":false}`),
	}
)

// tool opens the root for each call: the tools hold no descriptor between
// calls and need no Close.
type tool struct {
	root string
	spec agent.ToolSpec
	run  func(ctx context.Context, r *os.Root, args json.RawMessage) (string, error)
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
	out, err := t.run(ctx, r, args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	return out, nil
}

// pathArgs are the arguments every tool takes.
type pathArgs struct {
	Path string `json:"path"`
}

// decode parses args strictly into v: one JSON object, known fields only.
func decode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid arguments: trailing data after the JSON object")
	}
	return nil
}

// local checks a model-supplied path and turns it into one os.Root accepts.
// os.Root refuses escapes through symbolic links; the lexical checks here
// give a clearer message for the common cases.
func local(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New(`missing "path"`)
	case path.IsAbs(p) || filepath.IsAbs(p):
		return "", fmt.Errorf("path %q is absolute; paths are relative to the root", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q is outside the root", p)
	}
	return filepath.FromSlash(clean), nil
}

// openPath checks p and opens it under r, which must find a directory when
// dir is set and a regular file otherwise.
func openPath(r *os.Root, p string, dir bool) (*os.File, error) {
	name, err := local(p)
	if err != nil {
		return nil, err
	}
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case dir && !fi.IsDir():
		err = fmt.Errorf("%q is not a directory", p)
	case !dir && !fi.Mode().IsRegular():
		err = fmt.Errorf("%q is not a regular file", p)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size *int64 `json:"size,omitempty"`
}

func list(_ context.Context, r *os.Root, raw json.RawMessage) (string, error) {
	var args pathArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	f, err := openPath(r, args.Path, true)
	if err != nil {
		return "", err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return "", err
	}
	// File.ReadDir returns directory order; the model gets a stable one.
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	entries := make([]entry, 0, len(des))
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
		entries = append(entries, e)
	}
	out, err := json.Marshal(entries)
	return string(out), err
}

type readArgs struct {
	Path     string `json:"path"`
	MaxBytes int    `json:"maxBytes"`
}

func read(_ context.Context, r *os.Root, raw json.RawMessage) (string, error) {
	var args readArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	switch {
	case args.MaxBytes == 0:
		args.MaxBytes = DefaultMaxBytes
	case args.MaxBytes < 0 || args.MaxBytes > maxReadBytes:
		return "", fmt.Errorf("maxBytes %d is not between 1 and %d", args.MaxBytes, maxReadBytes)
	}
	f, err := openPath(r, args.Path, false)
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
}

func count(ctx context.Context, r *os.Root, raw json.RawMessage) (string, error) {
	var args pathArgs
	if err := decode(raw, &args); err != nil {
		return "", err
	}
	f, err := openPath(r, args.Path, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	c, err := countReader(ctx, f)
	if err != nil {
		return "", err
	}
	c.Path = path.Clean(args.Path)
	out, err := json.Marshal(c)
	return string(out), err
}

// countReader streams rd and counts like wc, with words as strings.Fields
// splits them: runs of runes that are not unicode.IsSpace, where an invalid
// UTF-8 byte is a non-space rune of one byte.
func countReader(ctx context.Context, rd io.Reader) (counts, error) {
	var c counts
	br := bufio.NewReader(rd)
	inWord := false
	last := rune('\n') // an empty file has no unterminated last line
	for n := 1; ; n++ {
		ch, size, err := br.ReadRune()
		if err == io.EOF {
			break
		}
		if err != nil {
			return counts{}, err
		}
		// Honour cancellation on huge files without a check per rune.
		if n%(1<<16) == 0 && ctx.Err() != nil {
			return counts{}, ctx.Err()
		}
		c.Bytes += int64(size)
		if ch == '\n' {
			c.Lines++
		}
		space := unicode.IsSpace(ch)
		if !space && !inWord {
			c.Words++
		}
		inWord = !space
		last = ch
	}
	if last != '\n' {
		c.Lines++
	}
	return c, nil
}
