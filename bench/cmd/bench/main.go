// Command bench runs every subactor benchmark in one process and writes
// RESULTS.md and results.json: per-delegation cost beside the raw
// protoactor floors and the Eino peer, cold start, live children at scale
// on both stores, the cost per step of a long-running child, parents
// delegating at once, resume from disk, fsynced session appends, a model
// call over HTTP, the node's main job beside a shell pipeline, and
// lifecycle latency distributions, each goal judged from this run's
// figures; and an ACP child's start, turn and dispose with the ACP Go
// SDK's example agent, when it is installed.
//
//	go run ./cmd/bench [-count 5] [-scale 1000,10000,100000] [-only delegation,mainjob] [-out .]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/bench"
	"github.com/subactor/subactor/persistence"
)

// sections are the parts of a run, in the order they run.
var sections = []string{"delegation", "scale", "steps", "parallel", "resume", "appends", "model", "latency", "mainjob", "acp"}

type config struct {
	count          int
	scale          []int
	scaleBolt      []int
	runs           int
	steps          int
	stepChildren   int
	parallelRounds int
	parallelDur    time.Duration
	resumeSamples  int
	appendDur      time.Duration
	modelCalls     int
	mainMB         int
	mainRounds     int
	node           string
	acpSamples     int
	acpAgent       string
	only           map[string]bool
	out            string
}

func main() {
	testing.Init()
	var c config
	var scale, scaleBolt, only string
	flag.IntVar(&c.count, "count", 5, "rounds of each per-operation benchmark; the median is reported")
	flag.StringVar(&scale, "scale", "1000,10000,100000", "live-children counts to measure on the memory store")
	flag.StringVar(&scaleBolt, "scale-bolt", "1000,10000", "live-children counts to measure on the bbolt store")
	flag.IntVar(&c.runs, "runs", 5000, "children per latency distribution")
	flag.IntVar(&c.steps, "steps", 420, "steps of each child in the step-growth measurement (at least 406)")
	flag.IntVar(&c.stepChildren, "step-children", 20, "children in the step-growth measurement")
	flag.IntVar(&c.parallelRounds, "parallel-rounds", 5, "rounds of the parallel-parents measurement")
	flag.DurationVar(&c.parallelDur, "parallel-dur", 300*time.Millisecond, "duration of each parent count in a parallel round")
	flag.IntVar(&c.resumeSamples, "resume-samples", 30, "resumes per history length")
	flag.DurationVar(&c.appendDur, "append-dur", 1500*time.Millisecond, "duration of each fsynced-append measurement")
	flag.IntVar(&c.modelCalls, "model-calls", 2000, "model calls (and as many bare requests) over HTTP")
	flag.IntVar(&c.mainMB, "mainjob-mb", 300, "size of the main job's generated tree in MB")
	flag.IntVar(&c.mainRounds, "mainjob-rounds", 7, "rounds of the main job beside the pipeline")
	flag.StringVar(&c.node, "node", "", "the node binary for the main job (default: built from the main module)")
	flag.IntVar(&c.acpSamples, "acp-samples", 5, "ACP children started, awaited and disposed one at a time (each turn of the example agent takes about 5 s)")
	flag.StringVar(&c.acpAgent, "acp-agent", "", "the ACP Go SDK's example agent (default: agent in the Go bin directory or on PATH; skipped when absent)")
	flag.StringVar(&only, "only", "", "comma-separated sections to run ("+strings.Join(sections, ",")+"); the others' goals are then not met")
	flag.StringVar(&c.out, "out", ".", "directory for RESULTS.md and results.json")
	flag.Parse()
	var err error
	if c.scale, err = ints(scale); err == nil {
		c.scaleBolt, err = ints(scaleBolt)
	}
	if err == nil && only != "" {
		c.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			if !slices.Contains(sections, s) {
				err = fmt.Errorf("unknown section %q in -only", s)
			}
			c.only[s] = true
		}
	}
	if err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(s, ",") {
		if field = strings.TrimSpace(field); field == "" {
			continue
		}
		n, err := strconv.Atoi(field)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad count %q", field)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
}

func run(c config) error {
	ctx := context.Background()
	began := time.Now()
	r := Results{Machine: machine(), Date: began.UTC().Format(time.RFC3339)}
	on := func(s string) bool { return c.only == nil || c.only[s] }
	dir, err := os.MkdirTemp("", "subactor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	if on("delegation") {
		r.Delegation = delegations(c.count, []named{
			{"RawProtoactor", bench.RawProtoactor},
			{"RawProtoactorInline", bench.RawProtoactorInline},
			{"SubactorSpawn", bench.SubactorSpawn},
			{"SubactorSpawnAsync", bench.SubactorSpawnAsync},
			{"SubactorSpawnBolt", bench.SubactorSpawnBolt},
			{"SubactorParentRun", bench.SubactorParentRun},
			{"SubactorParentRunBolt", bench.SubactorParentRunBolt},
			{"EinoAgentTool", bench.EinoAgentTool},
			{"ColdStart", bench.ColdStart},
			{"ColdStartWithSystem", bench.ColdStartWithSystem},
			{"NewSystem", bench.NewSystem},
		})
	}
	if on("scale") {
		for _, n := range c.scale {
			logf("scale: %d live children, memory store", n)
			s, err := bench.Scale(ctx, n)
			if err != nil {
				return err
			}
			r.Scale = append(r.Scale, ScaleRow{"memory", s})
		}
		for _, n := range c.scaleBolt {
			logf("scale: %d live children, bbolt store", n)
			s, err := boltScale(ctx, dir, n)
			if err != nil {
				return err
			}
			r.Scale = append(r.Scale, ScaleRow{"bbolt", s})
		}
	}
	if on("steps") {
		logf("step growth: %d children of %d steps", c.stepChildren, c.steps)
		sg, err := bench.StepGrowth(ctx, c.stepChildren, c.steps, 10, 400, 5)
		if err != nil {
			return err
		}
		r.StepGrowth = &sg
	}
	if on("parallel") {
		logf("parallel parents: %d rounds", c.parallelRounds)
		if r.Parallel, err = bench.Parallel(ctx, []int{1, 4, 16, 64}, c.parallelRounds, c.parallelDur); err != nil {
			return err
		}
	}
	if on("resume") {
		logf("resume from disk: %d samples each", c.resumeSamples)
		if r.Resume, err = bench.Resume(ctx, dir, []int{10, 100, 1000}, c.resumeSamples); err != nil {
			return err
		}
	}
	if on("appends") {
		for _, writers := range []int{1, 8, 64} {
			for _, group := range []bool{true, false} {
				logf("bbolt appends: %d writers, group commit %v", writers, group)
				rate, err := bench.BoltAppends(ctx, dir, writers, group, c.appendDur)
				if err != nil {
					return err
				}
				r.Appends = append(r.Appends, rate)
			}
		}
	}
	if on("model") {
		logf("model calls over HTTP: %d each", c.modelCalls)
		m, err := bench.ModelCall(ctx, c.modelCalls)
		if err != nil {
			return err
		}
		r.ModelCall = &m
	}
	if on("latency") {
		logf("latencies: %d children each", c.runs)
		l, err := bench.MeasureLatencies(ctx, c.runs)
		if err != nil {
			return err
		}
		r.Latencies = &l
	}
	if on("mainjob") {
		logf("main job: %d MB tree, %d rounds", c.mainMB, c.mainRounds)
		m := mainJob(ctx, c, dir)
		r.MainJob = &m
		if m.Error != "" {
			logf("main job failed: %s", m.Error)
		}
	}
	if on("acp") {
		a, err := acpChild(ctx, c)
		if err != nil {
			return err
		}
		r.ACP = &a
	}
	r.Seconds = time.Since(began).Seconds()
	r.Goals = goals(r)
	zeroNonFinite(reflect.ValueOf(&r))
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	md := markdown(r)
	if err := os.WriteFile(filepath.Join(c.out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "RESULTS.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// boltScale is bench.ScaleOn with a bbolt store of its own in dir.
func boltScale(ctx context.Context, dir string, n int) (bench.ScaleResult, error) {
	store, err := persistence.OpenBolt(filepath.Join(dir, fmt.Sprintf("scale-%d.db", n)))
	if err != nil {
		return bench.ScaleResult{}, err
	}
	defer store.Close()
	return bench.ScaleOn(ctx, n, store)
}

// mainJob builds the node binary from the main module (bench's parent
// directory) unless -node names one, and measures the main job. A failure
// is recorded in the result, so that the rest of the run is kept and the
// goal reads as not met.
func mainJob(ctx context.Context, c config, dir string) bench.MainJobResult {
	node := c.node
	if node == "" {
		node = filepath.Join(dir, "node")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", node, "./cmd/node")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			return bench.MainJobResult{Error: fmt.Sprintf("go build ./cmd/node: %v: %s", err, out)}
		}
	}
	m, err := bench.MainJob(ctx, node, filepath.Join(dir, "mainjob"), int64(c.mainMB)<<20, c.mainRounds)
	if err != nil {
		m.Error = err.Error()
	}
	return m
}

// acpChild measures ACP children on the example agent, or records why it
// was skipped: a machine without the agent still gets the rest of the
// run.
func acpChild(ctx context.Context, c config) (bench.ACPResult, error) {
	agent := c.acpAgent
	if agent == "" {
		agent = bench.FindExampleAgent()
	}
	if agent == "" {
		logf("ACP child: skipped, the example agent is not installed (%s)", bench.ExampleAgentInstall)
		return bench.ACPResult{Skipped: "the ACP Go SDK's example agent is not installed: " + bench.ExampleAgentInstall}, nil
	}
	logf("ACP child: %d children of %s", c.acpSamples, agent)
	return bench.ACPChild(ctx, agent, nil, nil, bench.ExamplePrompt, c.acpSamples)
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
			logf("per operation: %s (round %d of %d)", b.name, round+1, count)
			res := testing.Benchmark(b.f)
			for k, v := range []float64{float64(res.T.Nanoseconds()) / float64(res.N), float64(res.AllocedBytesPerOp()), float64(res.AllocsPerOp())} {
				samples[i][k] = append(samples[i][k], v)
			}
		}
	}
	mid := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	out := make([]Delegation, len(benches))
	for i, b := range benches {
		out[i] = Delegation{Name: b.name, Rounds: count, NsPerOp: mid(samples[i][0]), BytesPerOp: mid(samples[i][1]), AllocsPerOp: mid(samples[i][2])}
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
