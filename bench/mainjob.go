package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
)

// TreeTotals are the figures of a generated tree, known from generating it.
type TreeTotals struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// Newlines is what wc -l counts; Unterminated is how many non-empty
	// files lack a final newline (the survey counts their last line too).
	Newlines     int64 `json:"newlines"`
	Unterminated int64 `json:"unterminated"`
	Folders      int64 `json:"folders"`
}

// GenerateTree writes a deterministic tree of about size bytes under root,
// shaped like /usr/lib on this kind of machine (61,000 files, 4 GB: a
// median file of 3 KB, a mean of 65 KB, about half of its eight-byte
// blocks plain ASCII): a dozen top-level folders nested up to five deep,
// file sizes log-normal with that median and mean, half the files binary
// (runs of zeros, small integers, strings and random bytes, as in object
// files), most others source-like ASCII text, a few UTF-8 prose with
// multi-byte spaces; a third of the text files end without a newline.
func GenerateTree(root string, size int64, seed uint64) (TreeTotals, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var t TreeTotals
	dirs := []string{"."}
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		n := 12
		if depth > 0 {
			n = rng.IntN(4)
		}
		for i := range n {
			d := filepath.Join(dir, fmt.Sprintf("d%d-%d", depth, i))
			dirs = append(dirs, d)
			if depth < 4 {
				walk(d, depth+1)
			}
		}
	}
	walk(".", 0)
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return t, err
		}
	}
	t.Folders = int64(len(dirs))
	text, prose := corpus(rng, false), corpus(rng, true)
	var buf []byte
	for t.Bytes < size {
		// Log-normal: median e^8 ≈ 3 KB, mean e^(8+2.45²/2) ≈ 60 KB.
		n := int(min(math.Exp(8+2.45*rng.NormFloat64()), 64<<20, float64(size-t.Bytes)))
		buf = buf[:0]
		switch k := rng.IntN(20); {
		case k < 10:
			buf = appendBinary(buf, rng, n)
		case k < 19:
			buf = appendSlice(buf, rng, text, n)
		default:
			buf = appendSlice(buf, rng, prose, n)
		}
		if rng.IntN(3) > 0 && len(buf) > 0 && buf[len(buf)-1] != '\n' {
			buf[len(buf)-1] = '\n'
		}
		dir := dirs[rng.IntN(len(dirs))]
		name := filepath.Join(root, dir, fmt.Sprintf("f%05d.%s", t.Files, []string{"c", "go", "txt", "so", "py"}[rng.IntN(5)]))
		if err := os.WriteFile(name, buf, 0o644); err != nil {
			return t, err
		}
		t.Files++
		t.Bytes += int64(len(buf))
		t.Newlines += int64(bytes.Count(buf, []byte{'\n'}))
		if len(buf) > 0 && buf[len(buf)-1] != '\n' {
			t.Unterminated++
		}
	}
	return t, nil
}

// appendBinary appends n bytes shaped like an object file: runs of zeros,
// small little-endian integers, NUL-terminated names and random bytes.
func appendBinary(dst []byte, rng *rand.Rand, n int) []byte {
	end := len(dst) + n
	for len(dst) < end {
		k := 1 + rng.IntN(64)
		switch rng.IntN(4) {
		case 0:
			dst = append(dst, make([]byte, k)...)
		case 1:
			for range k / 4 {
				dst = append(dst, byte(rng.IntN(256)), byte(rng.IntN(16)), 0, 0)
			}
		case 2:
			for range k {
				dst = append(dst, "_abcdefghijklmnopqrstuvwxyz.0123456789"[rng.IntN(38)])
			}
			dst = append(dst, 0)
		default:
			for range k {
				dst = append(dst, byte(rng.Uint32()))
			}
		}
	}
	return dst[:end]
}

// corpus is 1 MiB of lines to cut files from: source-like ASCII, or prose
// with UTF-8 letters and multi-byte spaces.
func corpus(rng *rand.Rand, prose bool) []byte {
	words := []string{"func", "return", "err", "if", "x", "nil", "for", "range", "int", "(a,", "b)", "{", "}", "//", "value", "struct"}
	if prose {
		words = []string{"über", "naïve", "café", "日本語", "the", "and", "\u00a0", "\u3000", "déjà", "vu", "—", "\u2003", "smörgåsbord"}
	}
	var b []byte
	for len(b) < 1<<20 {
		b = append(b, strings.Repeat("\t", rng.IntN(3))...)
		for range 1 + rng.IntN(10) {
			b = append(b, words[rng.IntN(len(words))]...)
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	return b
}

// appendSlice appends n bytes of src from a random offset, wrapping round.
func appendSlice(dst []byte, rng *rand.Rand, src []byte, n int) []byte {
	off := rng.IntN(len(src))
	for n > 0 {
		k := min(n, len(src)-off)
		dst = append(dst, src[off:off+k]...)
		n -= k
		off = 0
	}
	return dst
}

// MainJobResult compares the node's survey of a generated tree with
// find -type f -print0 | wc -lc --files0-from=- on the same tree. Times
// are medians over rounds: wall time, and CPU time (user + system, the
// process and everything it started, from getrusage RUSAGE_CHILDREN).
type MainJobResult struct {
	Tree     TreeTotals `json:"tree"`
	Rounds   int        `json:"rounds"`
	NodeSecs float64    `json:"nodeSeconds"`
	NodeCPU  float64    `json:"nodeCPUSeconds"`
	PipeSecs float64    `json:"pipelineSeconds"`
	PipeCPU  float64    `json:"pipelineCPUSeconds"`
	// Ratio and CPURatio are the medians of the per-round ratios node ÷
	// pipeline.
	Ratio    float64 `json:"ratio"`
	CPURatio float64 `json:"cpuRatio"`
	// The same for node run -data :memory: (sessions in memory, no
	// fsync), for reference.
	MemorySecs     float64 `json:"memorySeconds"`
	MemoryCPU      float64 `json:"memoryCPUSeconds"`
	MemoryRatio    float64 `json:"memoryRatio"`
	MemoryCPURatio float64 `json:"memoryCPURatio"`
	// What the node's answer and the pipeline reported (last round).
	NodeFiles, NodeLines, NodeBytes int64
	PipeLines, PipeBytes            int64
	Answer                          string `json:"answer"`
	Error                           string `json:"error,omitempty"`
}

// surveyLine is the first line of the survey's answer: files, lines,
// the size in binary units (as du -h says it) and the folders, counts
// with thousands separators.
var surveyLine = regexp.MustCompile(`survey [^:]*: ([\d,]+) files?, ([\d,]+) lines?, ([0-9.]+ [KMGTPE]?i?B) in ([\d,]+) folders?`)

// surveyAnswer is the answer of `node run -json`'s result line (its last
// line of type node/result), or why there is none.
func surveyAnswer(out []byte) (string, error) {
	var answer string
	found := false
	for _, line := range bytes.Split(out, []byte("\n")) {
		var v struct {
			Type       string `json:"type"`
			StopReason string `json:"stopReason"`
			Answer     string `json:"answer"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &v) != nil || v.Type != "node/result" {
			continue
		}
		if v.StopReason != "completed" {
			return "", fmt.Errorf("node run stopped %s: %q", v.StopReason, v.Answer)
		}
		answer, found = v.Answer, true
	}
	if !found {
		return "", fmt.Errorf("node run -json printed no result: %q", out)
	}
	return answer, nil
}

// PipelineScript is the main job's baseline: GNU wc counting the lines
// and bytes of every file find lists (wc reads each file once, in bulk,
// counting newlines with the processor's vector instructions).
const PipelineScript = `find "$1" -type f -print0 | wc -lc --files0-from=-`

// timed runs cmd to its end and returns its output, wall time and CPU
// time (its own and its children's: getrusage RUSAGE_CHILDREN around it;
// nothing else this process starts may end meanwhile).
func timed(cmd *exec.Cmd) (out []byte, wall, cpu time.Duration, err error) {
	cpu0, began := CPUTime(syscall.RUSAGE_CHILDREN), time.Now()
	out, err = cmd.Output()
	return out, time.Since(began), CPUTime(syscall.RUSAGE_CHILDREN) - cpu0, err
}

// MainJob runs the node binary's survey (node run -quiet on its default
// on-disk session store, a fresh data directory each round; and again with
// sessions in memory) and the baseline pipeline alternately, rounds times
// each, on a tree of size bytes that it generates under dir. The page
// cache is warmed by one untimed run of each first.
func MainJob(ctx context.Context, node, dir string, size int64, rounds int) (MainJobResult, error) {
	var r MainJobResult
	tree := filepath.Join(dir, "tree")
	var err error
	if r.Tree, err = GenerateTree(tree, size, 11); err != nil {
		return r, err
	}
	type times struct{ wall, cpu time.Duration }
	pipeline := func() (times, error) {
		out, wall, cpu, err := timed(exec.CommandContext(ctx, "bash", "-c", PipelineScript, "pipeline", tree))
		if err != nil {
			return times{}, fmt.Errorf("pipeline: %w", err)
		}
		// The last line is the total: "LINES BYTES total".
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		f := strings.Fields(lines[len(lines)-1])
		if len(f) != 3 || f[2] != "total" {
			return times{}, fmt.Errorf("pipeline ended with %q", lines[len(lines)-1])
		}
		r.PipeLines, _ = strconv.ParseInt(f[0], 10, 64)
		r.PipeBytes, _ = strconv.ParseInt(f[1], 10, 64)
		return times{wall, cpu}, nil
	}
	survey := func(round int, memory bool) (times, error) {
		data := filepath.Join(dir, fmt.Sprintf("data-%d", round))
		if memory {
			data = ":memory:"
		}
		cmd := exec.CommandContext(ctx, node, "run", "-json", "-quiet", "-data", data, "-dir", tree)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, wall, cpu, err := timed(cmd)
		if !memory {
			_ = os.RemoveAll(data)
		}
		if err != nil {
			return times{}, fmt.Errorf("node run: %w: %s", err, stderr.Bytes())
		}
		answer, err := surveyAnswer(out)
		if err != nil {
			return times{}, err
		}
		m := surveyLine.FindStringSubmatch(answer)
		if m == nil {
			return times{}, fmt.Errorf("node run answered no survey line: %q", answer)
		}
		r.Answer = m[0]
		r.NodeFiles, _ = strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		r.NodeLines, _ = strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		// The answer gives the size in binary units: it is the tree's
		// when it reads as the tree's does.
		r.NodeBytes = -1
		if m[3] == humanize.IBytes(uint64(r.Tree.Bytes)) {
			r.NodeBytes = r.Tree.Bytes
		}
		return times{wall, cpu}, nil
	}
	// Warm the page cache and check that both work.
	if _, err := pipeline(); err != nil {
		return r, err
	}
	if _, err := survey(-1, false); err != nil {
		return r, err
	}
	var nodeT, nodeC, memT, memC, pipeT, pipeC, ratios, cpuRatios, memRatios, memCPURatios []float64
	for round := range rounds {
		p, err := pipeline()
		if err != nil {
			return r, err
		}
		n, err := survey(round, false)
		if err != nil {
			return r, err
		}
		m, err := survey(round, true)
		if err != nil {
			return r, err
		}
		nodeT, nodeC = append(nodeT, n.wall.Seconds()), append(nodeC, n.cpu.Seconds())
		memT, memC = append(memT, m.wall.Seconds()), append(memC, m.cpu.Seconds())
		pipeT, pipeC = append(pipeT, p.wall.Seconds()), append(pipeC, p.cpu.Seconds())
		ratios, cpuRatios = append(ratios, n.wall.Seconds()/p.wall.Seconds()), append(cpuRatios, n.cpu.Seconds()/p.cpu.Seconds())
		memRatios, memCPURatios = append(memRatios, m.wall.Seconds()/p.wall.Seconds()), append(memCPURatios, m.cpu.Seconds()/p.cpu.Seconds())
	}
	r.Rounds = rounds
	r.NodeSecs, r.NodeCPU, r.PipeSecs, r.PipeCPU = Median(nodeT), Median(nodeC), Median(pipeT), Median(pipeC)
	r.Ratio, r.CPURatio = Median(ratios), Median(cpuRatios)
	r.MemorySecs, r.MemoryCPU, r.MemoryRatio, r.MemoryCPURatio = Median(memT), Median(memC), Median(memRatios), Median(memCPURatios)
	if r.NodeFiles != r.Tree.Files || r.NodeBytes != r.Tree.Bytes || r.PipeBytes != r.Tree.Bytes ||
		r.PipeLines != r.Tree.Newlines || r.NodeLines != r.Tree.Newlines+r.Tree.Unterminated {
		return r, errors.New("the survey's totals differ from the tree's")
	}
	return r, nil
}

// Median is the median of v (NaN for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
