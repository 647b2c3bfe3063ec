// Command bench runs every subactor benchmark in one process and writes
// RESULTS.md and results.json: per-delegation cost (CPU time, wall time,
// bytes and allocations per operation over a fixed count) beside the
// protoactor floors and the Eino peers, cold start, live children at
// scale on both stores, the cost per step of a long-running child,
// parents delegating at once, resume from disk and from PostgreSQL,
// fsynced session appends on bbolt and on PostgreSQL (a throwaway server,
// internal/pgtest) and the fsyncs of a delegation, a model call over HTTP, the node's main
// job beside a shell pipeline, and lifecycle latency distributions, each
// goal judged by id from this run's figures; and an ACP child's start,
// turn and dispose with the ACP Go SDK's example agent, when it is
// installed.
//
//	go run ./cmd/bench [-count 5] [-scale 1000,10000,100000,1000000] [-only delegation,mainjob] [-out .]
//
// With -merge, the run starts from -out's results.json and measures only
// the sections of -only again: `go run ./cmd/bench -only remote-memory
// -merge` adds a hosting node's memory figures to the results without
// measuring the rest again (RESULTS.md says which sections were measured
// when).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
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
	"github.com/subactor/subactor/internal/testkit/pgtest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/postgres"
)

// sections are the parts of a run, in the order they run.
var sections = []string{"delegation", "scale", "steps", "parallel", "resume", "appends", "fsyncs", "model", "latency", "mainjob", "acp", "remote", "remote-memory"}

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
	fsyncOps       int
	boltDur        time.Duration
	remoteSamples  int
	only           map[string]bool
	merge          bool
	out            string
}

func main() {
	testing.Init()
	var c config
	var scale, scaleBolt, only string
	flag.IntVar(&c.count, "count", 5, "rounds of each per-operation benchmark; the median is reported")
	flag.StringVar(&scale, "scale", "1000,10000,100000,1000000", "live-children counts to measure on the memory store")
	flag.StringVar(&scaleBolt, "scale-bolt", "1000", "live-children counts to measure on the bbolt store")
	flag.IntVar(&c.runs, "runs", 5000, "children per latency distribution")
	flag.IntVar(&c.steps, "steps", 420, "steps of each child in the step-growth measurement (at least 406)")
	flag.IntVar(&c.stepChildren, "step-children", 20, "children in the step-growth measurement")
	flag.IntVar(&c.parallelRounds, "parallel-rounds", 5, "rounds of the parallel-parents measurement")
	flag.DurationVar(&c.parallelDur, "parallel-dur", 300*time.Millisecond, "duration of each parent count in a parallel round")
	flag.IntVar(&c.resumeSamples, "resume-samples", 30, "resumes per history length")
	flag.DurationVar(&c.appendDur, "append-dur", 1500*time.Millisecond, "duration of each fsynced-append measurement")
	flag.IntVar(&c.modelCalls, "model-calls", 2000, "model calls (and as many bare requests) over HTTP")
	flag.IntVar(&c.mainMB, "mainjob-mb", 300, "size of the main job's generated tree in MB")
	flag.IntVar(&c.mainRounds, "mainjob-rounds", 5, "rounds of the main job beside the pipeline")
	flag.StringVar(&c.node, "node", "", "the node binary for the main job (default: built from the main module)")
	flag.IntVar(&c.acpSamples, "acp-samples", 3, "ACP children started, awaited and disposed one at a time (each turn of the example agent takes about 5 s)")
	flag.StringVar(&c.acpAgent, "acp-agent", "", "the ACP Go SDK's example agent (default: agent in the Go bin directory or on PATH; skipped when absent)")
	flag.StringVar(&only, "only", "", "comma-separated sections to run ("+strings.Join(sections, ",")+"); the others' goals are then not met")
	flag.StringVar(&c.out, "out", ".", "directory for RESULTS.md and results.json")
	flag.BoolVar(&c.merge, "merge", false, "start from -out's results.json: the sections of -only are measured again, the others' figures and verdicts kept")
	flag.IntVar(&c.fsyncOps, "fsync-ops", 200, "delegations (and a quarter as many parent runs) whose fsyncs are counted")
	flag.DurationVar(&c.boltDur, "bolt-dur", time.Second, "duration of each parent count delegating at once on bbolt")
	flag.IntVar(&c.remoteSamples, "remote-samples", 500, "remote start→result→dispose runs (and as many raw remote requests) between two node processes")
	probe := flag.Int("fsync-probe", -1, "internal: run this many delegations on bbolt (see bench.FsyncProbe) and exit")
	probeParents := flag.Bool("probe-parent-runs", false, "internal: with -fsync-probe, parent runs instead of delegations")
	flag.Parse()
	if *probe >= 0 {
		if err := fsyncProbe(*probe, *probeParents); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
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
	if err == nil && c.merge && c.only == nil {
		err = errors.New("-merge needs -only: the sections to measure again")
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
	var earlier, base []Goal
	if c.merge {
		var err error
		if r, err = readResults(c.out); err != nil {
			return err
		}
		earlier, base = r.Goals, goals(r)
		only := slices.Sorted(maps.Keys(c.only))
		r.Merged = append(r.Merged, Rerun{Date: began.UTC().Format(time.RFC3339), Machine: machine(), Sections: only})
	}
	on := func(s string) bool { return c.only == nil || c.only[s] }
	dir, err := os.MkdirTemp("", "subactor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	if on("delegation") {
		if r.Delegation, err = delegations(ctx, c.count, perOp); err != nil {
			return err
		}
		if r.OneP, err = onePDelegations(ctx, c.count); err != nil {
			return err
		}
		for _, cold := range []struct {
			name    string
			measure func() (bench.Cost, error)
		}{
			{"ColdStart", func() (bench.Cost, error) { return bench.ColdStart(ctx, 200) }},
			{"NewSystem", func() (bench.Cost, error) { return bench.NewSystem(20) }},
		} {
			logf("cold start: %s", cold.name)
			cost, err := cold.measure()
			if err != nil {
				return fmt.Errorf("%s: %w", cold.name, err)
			}
			r.Delegation = append(r.Delegation, Delegation{Name: cold.name, Rounds: 1, Cost: cost})
		}
	}
	if on("scale") {
		r.Scale = nil // a merge's earlier rows are replaced, not added to
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
	// The shared store's figures run on a throwaway PostgreSQL server,
	// started when first needed; where none is installed they are
	// skipped (and their goal reads as not met).
	var pg *pgtest.Server
	defer func() {
		if pg != nil {
			pg.Close()
		}
	}()
	onPostgres := func(f func(store persistence.Store) error) error {
		if pg == nil {
			if pg, err = pgtest.Launch(); errors.Is(err, pgtest.ErrNotInstalled) {
				logf("skipped: %v", err)
				return nil
			} else if err != nil {
				return err
			}
		}
		url, err := pg.Schema() // each measurement on empty tables
		if err != nil {
			return err
		}
		store, err := postgres.Open(ctx, url)
		if err != nil {
			return err
		}
		defer store.Close()
		return f(store)
	}
	if on("resume") {
		turns := []int{10, 100, 1000}
		logf("resume from disk: %d samples each", c.resumeSamples)
		if r.Resume, err = bench.Resume(ctx, dir, turns, c.resumeSamples); err != nil {
			return err
		}
		logf("resume from PostgreSQL: %d samples each", c.resumeSamples)
		if err := onPostgres(func(store persistence.Store) (err error) {
			r.PostgresResume, err = bench.ResumeOn(ctx, store, turns, c.resumeSamples)
			return err
		}); err != nil {
			return err
		}
	}
	if on("appends") {
		r.Appends, r.PostgresAppends = nil, nil // a merge's earlier rows are replaced
		for _, writers := range []int{1, 8, 64} {
			for _, group := range []bool{true, false} {
				logf("bbolt appends: %d writers, group commit %v", writers, group)
				rate, err := bench.BoltAppends(ctx, dir, writers, group, c.appendDur)
				if err != nil {
					return err
				}
				r.Appends = append(r.Appends, rate)
				logf("PostgreSQL appends: %d writers, group commit %v", writers, group)
				if err := onPostgres(func(store persistence.Store) error {
					rate, err := bench.Appends(ctx, store, writers, group, c.appendDur)
					r.PostgresAppends = append(r.PostgresAppends, rate)
					return err
				}); err != nil {
					return err
				}
			}
		}
	}
	if on("fsyncs") {
		logf("fsyncs per delegation on bbolt: %d delegations, %d parent runs", c.fsyncOps, c.fsyncOps/4)
		f, err := fsyncs(ctx, c)
		if err != nil {
			f.Error = err.Error()
			logf("fsyncs: %v", err)
		}
		logf("bbolt: 1 and 64 parents delegating at once")
		store, err := persistence.OpenBolt(filepath.Join(dir, "parallel.db"))
		if err != nil {
			return err
		}
		f.Parallel, err = bench.ParallelOn(ctx, store, []int{1, 64}, 5, c.boltDur)
		store.Close()
		if err != nil {
			return err
		}
		r.Fsyncs = &f
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
	if on("remote") || on("remote-memory") {
		host := filepath.Join(dir, "remotehost")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", host, "./cmd/remotehost").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/remotehost: %v: %s", err, out)
		}
		if on("remote") {
			logf("remote runs over loopback: %d samples", c.remoteSamples)
			m, err := bench.Remote(ctx, host, c.remoteSamples, 8, 100)
			if err != nil {
				return err
			}
			if r.Remote != nil {
				m.Memory = r.Remote.Memory // a merge's, unless measured below
			}
			r.Remote = &m
		}
		if on("remote-memory") {
			logf("remote memory: %d runs in flight on one host", remoteInFlight)
			m, err := bench.RemoteMemory(ctx, host, remoteInFlight)
			if err != nil {
				return err
			}
			if r.Remote == nil {
				r.Remote = &bench.RemoteResult{}
			}
			r.Remote.Memory = &m
		}
	}
	if c.merge {
		r.Merged[len(r.Merged)-1].Seconds = time.Since(began).Seconds()
		r.Goals = keepVerdicts(earlier, base, goals(r))
	} else {
		r.Seconds = time.Since(began).Seconds()
		r.Goals = goals(r)
	}
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

// readResults reads the results.json of dir, for -merge.
func readResults(dir string) (Results, error) {
	var r Results
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return r, fmt.Errorf("-merge: %w", err)
	}
	return r, nil
}

// keepVerdicts is now, judged after a merge, with each goal this run's
// figures did not change (judged the same as base, from the merged file
// before this run measured anything) taken from earlier as it was judged
// then: a figure that was not a number reads 0 in results.json, and
// judged again it would count as measured.
func keepVerdicts(earlier, base, now []Goal) []Goal {
	was, before := map[string]Goal{}, map[string]Goal{}
	for _, g := range earlier {
		was[g.ID] = g
	}
	for _, g := range base {
		before[g.ID] = g
	}
	for i, g := range now {
		e, ok := was[g.ID]
		if b, same := before[g.ID]; ok && same && reflect.DeepEqual(b, g) {
			now[i] = e
		}
	}
	return now
}

// remoteInFlight is how many remote runs wait at once on one host for
// the memory figures.
const remoteInFlight = 2000

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

// opSpec is a per-operation benchmark and its operations a round.
type opSpec struct {
	name  string
	op    bench.Op
	count int
}

// perOp are the per-operation benchmarks and the fixed count of
// operations each round times: enough for a few hundred milliseconds.
var perOp = []opSpec{
	{"LeanFloor", bench.LeanFloor, 20000},
	{"RawProtoactor", bench.RawProtoactor, 10000},
	{"SubactorSpawn", bench.SubactorSpawn, 10000},
	{"SubactorParentRun", bench.SubactorParentRun, 5000},
	{"SubactorParentRunListened", bench.SubactorParentRunListened, 5000},
	{"SubactorParentRunTraced", bench.SubactorParentRunTraced, 5000},
	{"EinoCompiled", bench.EinoCompiled, 5000},
	{"EinoCompiledCallbacks", bench.EinoCompiledCallbacks, 5000},
	{"EinoAgentTool", bench.EinoAgentTool, 2000},
	{"SubactorSpawnBolt", bench.SubactorSpawnBolt, 100},
	{"SubactorParentRunBolt", bench.SubactorParentRunBolt, 50},
}

// onePDelegations measures the two CPU goals' sides again with one P
// (GOMAXPROCS=1), where handing a goroutine to another P, and waking an
// idle thread to take it, cannot happen: what is left is the work itself.
// Like with like: every side runs onePCount operations a round, in the
// same interleaved rounds of one process. floor-lean-1p is judged from
// these figures; the other ratio is informational.
func onePDelegations(ctx context.Context, count int) ([]Delegation, error) {
	var ops []opSpec
	for _, o := range perOp {
		switch o.name {
		case "LeanFloor", "SubactorSpawn", "SubactorParentRun", "EinoCompiled":
			o.count = onePCount
			ops = append(ops, o)
		}
	}
	// SubactorSpawn's two parts, each by itself (see floorLeanOneP).
	ops = append(ops, opSpec{"AgentAlone", bench.AgentAlone, onePCount}, opSpec{"RunAlone", bench.RunAlone, onePCount})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	logf("per operation at one P (GOMAXPROCS=1)")
	return delegations(ctx, count, ops)
}

// onePCount is the operations of each one-P round, alike for every side.
const onePCount = 10000

// delegations runs every benchmark once per round, count rounds, and keeps
// the median of each figure. Interleaving the rounds lets whatever else the
// machine is doing weigh on every implementation alike.
func delegations(ctx context.Context, count int, ops []opSpec) ([]Delegation, error) {
	samples := make([][4][]float64, len(ops))
	for round := range count {
		for i, o := range ops {
			logf("per operation: %s, %d ops (round %d of %d)", o.name, o.count, round+1, count)
			c, err := bench.Measure(ctx, o.op, o.count)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			for k, v := range []float64{c.CPUNs, c.WallNs, c.Bytes, c.Allocs} {
				samples[i][k] = append(samples[i][k], v)
			}
		}
	}
	out := make([]Delegation, len(ops))
	for i, o := range ops {
		s := samples[i]
		out[i] = Delegation{Name: o.name, Rounds: count, Cost: bench.Cost{Ops: o.count,
			CPUNs: bench.Median(s[0]), WallNs: bench.Median(s[1]), Bytes: bench.Median(s[2]), Allocs: bench.Median(s[3])}}
	}
	return out, nil
}

// fsyncProbe is this binary run under strace by fsyncs.
func fsyncProbe(n int, parentRuns bool) error {
	dir, err := os.MkdirTemp("", "subactor-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return bench.FsyncProbe(context.Background(), dir, n, parentRuns)
}

// fsyncs counts the flushes of c.fsyncOps delegations, and of a quarter as
// many parent runs, beyond those of opening and closing the store: this
// binary run as a probe under strace, with n and with none.
func fsyncs(ctx context.Context, c config) (bench.FsyncResult, error) {
	f := bench.FsyncResult{Delegations: c.fsyncOps, ParentRuns: c.fsyncOps / 4}
	self, err := os.Executable()
	if err != nil {
		return f, err
	}
	count := func(n int, parents bool) (bench.Syncs, error) {
		return bench.CountSyncs(ctx, self, "-fsync-probe", strconv.Itoa(n), "-probe-parent-runs="+strconv.FormatBool(parents))
	}
	for _, m := range []struct {
		n            int
		parents      bool
		into, growth *float64
	}{{f.Delegations, false, &f.PerDelegation, &f.GrowthPerDelegation}, {f.ParentRuns, true, &f.PerParentRun, nil}} {
		base, err := count(0, m.parents)
		if err != nil {
			return f, err
		}
		all, err := count(m.n, m.parents)
		if err != nil {
			return f, err
		}
		*m.into = float64(all.All-base.All) / float64(m.n)
		if m.growth != nil {
			*m.growth = float64(all.Fsync-base.Fsync) / float64(m.n)
		}
		f.OpenClose = base.All
	}
	return f, nil
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
