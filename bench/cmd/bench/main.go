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
	r.Delegation = delegations(count, []named{
		{"RawProtoactor", bench.RawProtoactor},
		{"SubactorSpawn", bench.SubactorSpawn},
		{"SubactorSpawnBolt", bench.SubactorSpawnBolt},
		{"SubactorParentRun", bench.SubactorParentRun},
		{"EinoAgentTool", bench.EinoAgentTool},
	})
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

type named struct {
	name string
	f    func(*testing.B)
}

// delegations runs every benchmark once per round, count rounds, and keeps
// the median of each figure. Interleaving the rounds lets whatever else the
// machine is doing weigh on every implementation alike, so the ratios hold
// even when the absolute times drift.
func delegations(count int, benches []named) []Delegation {
	samples := make([][3][]float64, len(benches))
	for round := range count {
		for i, b := range benches {
			fmt.Fprintf(os.Stderr, "delegation: %s (round %d of %d)\n", b.name, round+1, count)
			res := testing.Benchmark(b.f)
			for k, v := range []float64{float64(res.NsPerOp()), float64(res.AllocedBytesPerOp()), float64(res.AllocsPerOp())} {
				samples[i][k] = append(samples[i][k], v)
			}
		}
	}
	mid := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	out := make([]Delegation, len(benches))
	for i, b := range benches {
		out[i] = Delegation{Name: b.name, NsPerOp: mid(samples[i][0]), BytesPerOp: mid(samples[i][1]), AllocsPerOp: mid(samples[i][2])}
	}
	return out
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
