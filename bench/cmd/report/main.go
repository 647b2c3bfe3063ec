// Command report reads `go test -bench -benchmem` output on stdin and prints
// each benchmark's median time, bytes and allocations per operation beside
// the floor's, with the ratio to the floor.
//
//	go test -run '^$' -bench . -benchmem -count 5 . | go run ./cmd/report
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	floor := flag.String("floor", "RawProtoactor", "the benchmark the others are divided by")
	flag.Parse()
	results, err := parse(os.Stdin)
	if err == nil {
		err = render(os.Stdout, results, *floor)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// units are the per-operation figures reported, in column order.
var units = []string{"ns/op", "B/op", "allocs/op"}

// result is one benchmark's samples per unit, in input order of first sight.
type result struct {
	name    string
	samples map[string][]float64
}

// parse reads benchmark lines such as
// "BenchmarkX-2  100  15264 ns/op  2516 B/op  43 allocs/op" and ignores the
// rest.
func parse(r io.Reader) ([]*result, error) {
	var out []*result
	byName := map[string]*result{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		res := byName[name]
		if res == nil {
			res = &result{name: name, samples: map[string][]float64{}}
			byName[name] = res
			out = append(out, res)
		}
		// After the iteration count come value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			res.samples[f[i+1]] = append(res.samples[f[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no benchmark results in the input")
	}
	return out, nil
}

// median is the middle sample, or the mean of the two middle ones.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// render writes the medians and, for every unit, the ratio to floor.
func render(w io.Writer, results []*result, floor string) error {
	i := slices.IndexFunc(results, func(r *result) bool { return r.name == floor })
	if i < 0 {
		return fmt.Errorf("no results for the floor %q", floor)
	}
	base := results[i]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "benchmark\t"
	for _, u := range units {
		header += u + "\t"
	}
	for _, u := range units {
		header += u + " ×floor\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range results {
		name := r.name
		if r == base {
			name += " (floor)"
		}
		line := name + "\t"
		var ratios string
		for _, u := range units {
			v, ok := r.samples[u]
			b, bok := base.samples[u]
			if !ok || !bok {
				return fmt.Errorf("%s: no %s (run with -benchmem)", r.name, u)
			}
			m := median(v)
			line += strconv.FormatFloat(m, 'f', -1, 64) + "\t"
			ratios += strconv.FormatFloat(m/median(b), 'f', 2, 64) + "\t"
		}
		fmt.Fprintln(tw, line+ratios)
	}
	return tw.Flush()
}
