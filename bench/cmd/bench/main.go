// Command bench runs every subactor benchmark in one process and writes
// RESULTS.md and results.json: per-delegation cost beside the raw
// protoactor floor and the Eino peer, live children at scale, fsynced
// session appends, and lifecycle latency distributions, each checked
// against the goals of the benchmark issue.
//
//	go run ./cmd/bench [-count 5] [-scale 1000,10000,100000] [-runs 5000] [-out .]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/bench"
)

func main() {
	testing.Init()
	count := flag.Int("count", 5, "runs of each per-delegation benchmark; the median is reported")
	scales := flag.String("scale", "1000,10000,100000", "live-children counts to measure")
	runs := flag.Int("runs", 5000, "children per latency distribution")
	out := flag.String("out", ".", "directory for RESULTS.md and results.json")
	flag.Parse()
	if err := run(*count, *scales, *runs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(count int, scales string, runs int, out string) error {
	ctx := context.Background()
	r := Results{Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339)}
	for _, c := range []struct {
		name string
		f    func(*testing.B)
	}{
		{"RawProtoactor", bench.RawProtoactor},
		{"SubactorSpawn", bench.SubactorSpawn},
		{"SubactorSpawnBolt", bench.SubactorSpawnBolt},
		{"SubactorParentRun", bench.SubactorParentRun},
		{"EinoAgentTool", bench.EinoAgentTool},
	} {
		fmt.Fprintf(os.Stderr, "delegation: %s\n", c.name)
		r.Delegation = append(r.Delegation, median(c.name, count, c.f))
	}
	for _, field := range strings.Split(scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -scale entry %q", field)
		}
		fmt.Fprintf(os.Stderr, "scale: %d live children\n", n)
		s, err := bench.Scale(ctx, n)
		if err != nil {
			return err
		}
		r.Scale = append(r.Scale, s)
	}
	dir, err := os.MkdirTemp("", "subactor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, writers := range []int{1, 16} {
		fmt.Fprintf(os.Stderr, "bbolt appends: %d writers\n", writers)
		rate, err := bench.BoltAppends(ctx, dir, writers, 1000*writers)
		if err != nil {
			return err
		}
		r.Appends = append(r.Appends, rate)
	}
	fmt.Fprintf(os.Stderr, "latencies: %d children each\n", runs)
	if r.Latencies, err = bench.MeasureLatencies(ctx, runs); err != nil {
		return err
	}
	r.Goals = goals(r)
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	md := markdown(r)
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "RESULTS.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// median runs f count times and keeps the median of each figure.
func median(name string, count int, f func(*testing.B)) Delegation {
	var ns, bytes, allocs []float64
	for range count {
		res := testing.Benchmark(f)
		ns = append(ns, float64(res.NsPerOp()))
		bytes = append(bytes, float64(res.AllocedBytesPerOp()))
		allocs = append(allocs, float64(res.AllocsPerOp()))
	}
	mid := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	return Delegation{Name: name, NsPerOp: mid(ns), BytesPerOp: mid(bytes), AllocsPerOp: mid(allocs)}
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return m
}
