package main

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/subactor/subactor/bench"
)

func cost(cpu, allocs, bytes float64) bench.Cost {
	return bench.Cost{CPUNs: cpu, WallNs: cpu, Allocs: allocs, Bytes: bytes}
}

// figures is a complete run whose figures meet every goal.
func figures() Results {
	return Results{
		Delegation: []Delegation{
			{Name: "LeanFloor", Cost: cost(3_000, 20, 1000)},
			{Name: "RawProtoactor", Cost: cost(10_000, 40, 2000)},
			{Name: "SubactorSpawn", Cost: cost(11_000, 36, 9000)},
			{Name: "SubactorParentRun", Cost: cost(35_000, 70, 7000)},
			{Name: "EinoCompiled", Cost: cost(75_000, 500, 40000)},
			{Name: "ColdStart", Cost: cost(60_000, 150, 16_000)},
			{Name: "NewSystem", Cost: cost(2_500_000, 66_000, 2_900_000)},
			{Name: "SubactorParentRunTraced", Cost: cost(40_000, 150, 20_000)},
		},
		Scale: []ScaleRow{
			{"memory", bench.ScaleResult{Children: 1000, HeapBytesPerChild: 3000, StackBytesPerChild: 4000, GoroutinesPerChild: 1, RSSBytesPerChild: 9000}},
			{"memory", bench.ScaleResult{Children: 100_000, HeapBytesPerChild: 3500, StackBytesPerChild: 4096, GoroutinesPerChild: 1, RSSBytesPerChild: 10000}},
			{"memory", bench.ScaleResult{Children: 1_000_000, HeapBytesPerChild: 3500, StackBytesPerChild: 4096, GoroutinesPerChild: 1, RSSBytesPerChild: 10000}},
			{"bbolt", bench.ScaleResult{Children: 1000, HeapBytesPerChild: 9000, StackBytesPerChild: 8192, GoroutinesPerChild: 1}},
		},
		StepGrowth: &bench.StepGrowthResult{Early: bench.StepCost{Step: 10, Nanos: 5000, Bytes: 3000}, Late: bench.StepCost{Step: 400, Nanos: 5400, Bytes: 3000}},
		Latencies:  &bench.Latencies{Dispose: bench.Distribution{P99: 50}, Isolation: bench.Isolation{Ratio: 1.02}},
		MainJob: &bench.MainJobResult{Tree: bench.TreeTotals{Files: 10, Bytes: 1000}, Ratio: 0.9, CPURatio: 1.4,
			NodeFiles: 10, NodeBytes: 1000, PipeBytes: 1000},
		Fsyncs:          &bench.FsyncResult{PerDelegation: 2, Parallel: []bench.ParallelResult{{Parents: 1, Speedup: 1}, {Parents: 64, Speedup: 9}}},
		Appends:         []bench.AppendRate{{Writers: 64, GroupCommit: true, AppendsPerSecond: 9000}, {Writers: 64, AppendsPerSecond: 1400}},
		PostgresAppends: []bench.AppendRate{{Writers: 64, GroupCommit: true, AppendsPerSecond: 9500}, {Writers: 64, AppendsPerSecond: 20000}},
		Remote: &bench.RemoteResult{Samples: 500, Raw: bench.Distribution{P50: 400}, Run: bench.Distribution{P50: 500}, Ratio: 1.25, OneNode: 12_000, OneHost: 6_000, TwoHosts: 7_000,
			OneNodeCPU: 80_000, OneHostCPU: 400_000, TwoHostsCPU: 480_000,
			Memory: &bench.RemoteMemoryResult{Runs: 2000, BeforeBytes: 40 << 20, LoadedBytes: 80 << 20, AfterBytes: 44 << 20, BytesPerRun: 20971.52, AfterRatio: 1.1}},
		OneP: []Delegation{
			{Name: "LeanFloor", Cost: bench.Cost{Ops: 10000, CPUNs: 6_000, Allocs: 18}},
			{Name: "SubactorSpawn", Cost: bench.Cost{Ops: 10000, CPUNs: 13_000, Allocs: 39}},
		},
	}
}

var allGoals = []string{"eino-compiled", "allocs-spawn", "allocs-parent-run", "floor-lean-1p", "child-rss", "main-job", "fsyncs-per-delegation", "step-growth", "cold-start",
	"listener-isolation", "dispose-p99", "goroutines-per-child", "remote-run", "remote-scale", "remote-memory", "postgres-appends", "traces-on"}

func judged(r Results) map[string]Goal {
	out := map[string]Goal{}
	for _, g := range goals(r) {
		out[g.ID] = g
	}
	return out
}

func TestEveryGoalIsMetByFiguresThatMeetIt(t *testing.T) {
	got := judged(figures())
	for _, id := range allGoals {
		if g, ok := got[id]; !ok || !g.Met {
			t.Errorf("goal %s: %+v (present %v), want met", id, g, ok)
		}
	}
	if len(got) != len(allGoals) {
		t.Errorf("%d goals, want %d", len(got), len(allGoals))
	}
}

// Each goal fails when its own figure misses, and only that goal.
func TestEachGoalFailsOnItsOwnFigure(t *testing.T) {
	for id, spoil := range map[string]func(*Results){
		"eino-compiled":         func(r *Results) { r.Delegation[4].Allocs = 270 }, // 270/70 < 4, CPU still 2.1×
		"allocs-spawn":          func(r *Results) { r.Delegation[2].Allocs = 58 },
		"allocs-parent-run":     func(r *Results) { r.Delegation[3].Allocs = 111 }, // Eino's 500/111 still ≥ 4
		"floor-lean-1p":         func(r *Results) { r.OneP[0].CPUNs = 5_900 },      // 13/5.9 > 2.2
		"remote-memory":         func(r *Results) { r.Remote.Memory.AfterRatio = 1.21 },
		"child-rss":             func(r *Results) { r.Scale = r.Scale[:2] }, // 1M never reached
		"step-growth":           func(r *Results) { r.StepGrowth.Late.Bytes = 3301 },
		"cold-start":            func(r *Results) { r.Delegation[5].Bytes = 30_001 },
		"listener-isolation":    func(r *Results) { r.Latencies.Isolation.Ratio = 1.11 },
		"main-job":              func(r *Results) { r.MainJob.Ratio = 1.01 }, // CPU within, wall not
		"fsyncs-per-delegation": func(r *Results) { r.Fsyncs.Parallel[1].Speedup = 7.9 },
		"dispose-p99":           func(r *Results) { r.Latencies.Dispose.P99 = 101 },
		"goroutines-per-child":  func(r *Results) { r.Scale[0].GoroutinesPerChild = 2 },
		"remote-run":            func(r *Results) { r.Remote.Ratio = 1.31 },
		"remote-scale":          func(r *Results) { r.Remote.TwoHostsCPU = r.Remote.OneHostCPU * 1.26 },
		"postgres-appends":      func(r *Results) { r.PostgresAppends[0].AppendsPerSecond = 8999 }, // the other row is not judged
		"traces-on":             func(r *Results) { r.Delegation[7].CPUNs = 45_600 },               // > 1.3 × 35 µs
	} {
		r := figures()
		spoil(&r)
		for other, g := range judged(r) {
			if want := other != id; g.Met != want {
				t.Errorf("spoiling %s: goal %s met %v, want %v (%+v)", id, other, g.Met, want, g.Checks)
			}
		}
	}
}

// A goal whose figures were not measured is not met: none passes by
// construction.
func TestUnmeasuredGoalsAreNotMet(t *testing.T) {
	for id, g := range judged(Results{}) {
		if g.Met {
			t.Errorf("goal %s met with nothing measured: %+v", id, g)
		}
	}
	r := figures()
	r.MainJob = &bench.MainJobResult{Error: "go build failed"}
	r.Latencies.Isolation.Ratio = math.NaN()
	got := judged(r)
	if got["main-job"].Met || !strings.Contains(got["main-job"].Detail, "go build failed") || got["listener-isolation"].Met {
		t.Errorf("failed or missing measurements judged met: %+v, %+v", got["main-job"], got["listener-isolation"])
	}
	// NaN never reaches the JSON.
	r.Goals = goals(r)
	zeroNonFinite(reflect.ValueOf(&r))
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

func TestReportShowsTheFiguresAndVerdicts(t *testing.T) {
	r := figures()
	r.Delegation[3].CPUNs = 100_000
	r.Goals = goals(r)
	md := markdown(r)
	for _, want := range []string{"| SubactorSpawn | 0 | 11.0 µs | 11.0 µs |", "| memory | 100000 | 10000 B | 3500 B | 4096 B | 7596 B |", "| `eino-compiled` |", "**no**", "| `main-job` |", "`find TREE -type f -print0 | wc -lc --files0-from=-`"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// The ACP child shows its figures, in milliseconds, or why it was skipped;
// it has no goal of its own.
func TestReportShowsTheACPChildOrWhyItWasSkipped(t *testing.T) {
	r := figures()
	r.ACP = &bench.ACPResult{Agent: "agent", Samples: 2, Start: bench.Distribution{Samples: 2, P50: 4200, P99: 5100, Max: 5100},
		Turn: bench.Distribution{Samples: 2, P50: 5_250_000}, Dispose: bench.Distribution{Samples: 2, P50: 1500}, Total: bench.Distribution{Samples: 2}}
	r.Goals = goals(r)
	if len(r.Goals) != len(allGoals) {
		t.Fatalf("%d goals, want %d", len(r.Goals), len(allGoals))
	}
	md := markdown(r)
	for _, want := range []string{"## ACP child", "| start | 2 | 4.20 ms | 5.10 ms | 5.10 ms |", "| turn (the agent's) | 2 | 5250.00 ms |", "| dispose | 2 | 1.50 ms |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	r.ACP = &bench.ACPResult{Skipped: "the ACP Go SDK's example agent is not installed: " + bench.ExampleAgentInstall}
	if md := markdown(r); !strings.Contains(md, "Skipped: the ACP Go SDK's example agent is not installed: go install github.com/coder/acp-go-sdk/example/agent@v0.13.0.") {
		t.Errorf("report lacks the skip note:\n%s", md[strings.Index(md, "## ACP child"):])
	}
}

// floor-lean-1p is judged at one P, from the one-P rounds only: the ratio
// at the machine's P count is shown beside it and changes nothing; the
// eino-compiled goal shows its one-P ratio without judging it. A run
// without one-P figures misses floor-lean-1p.
func TestFloorLeanIsJudgedAtOnePOnly(t *testing.T) {
	r := figures()
	r.Delegation[2].CPUNs = 60_000 // 20× the lean floor at two P: not judged
	r.OneP = append(r.OneP, Delegation{Name: "SubactorParentRun", Cost: cost(50_000, 110, 9000)},
		Delegation{Name: "EinoCompiled", Cost: cost(40_000, 306, 27000)})
	r.Goals = goals(r)
	got := judged(r)
	for id, want := range map[string]string{
		"floor-lean-1p": "at one P: CPU 13.0 µs against 6.0 µs, 10000 ops each; at the machine's P count (not judged): 20.00×",
		"eino-compiled": "at one P (GOMAXPROCS=1, not judged): EinoCompiled ÷ SubactorParentRun, CPU: 0.80× (40.0 µs against 50.0 µs)",
	} {
		if g := got[id]; !g.Met || !strings.Contains(g.Detail, want) {
			t.Errorf("goal %s: met %v, detail %q, want met and %q", id, g.Met, g.Detail, want)
		}
	}
	if g := got["floor-lean-1p"]; g.Measured > 2.17 || g.Measured < 2.16 {
		t.Errorf("floor-lean-1p measured %v, want 13/6", g.Measured)
	}
	md := markdown(r)
	for _, want := range []string{"The same at one P", "| SubactorSpawn | 10000 | 13.0 µs | 0.0 µs | 39 | 2.17 |", "| `floor-lean-1p` |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	r.OneP = nil
	if g := judged(r)["floor-lean-1p"]; g.Met || !g.Checks[0].Missing {
		t.Errorf("floor-lean-1p without one-P figures: %+v", g)
	}
	if strings.Contains(markdown(r), "The same at one P") {
		t.Error("the report shows a one-P table without its figures")
	}
}

// The remote memory figures have a section of their own, also when the
// run measured nothing else of the remote section.
func TestReportShowsTheRemoteMemory(t *testing.T) {
	r := figures()
	r.Goals = goals(r)
	md := markdown(r)
	for _, want := range []string{"## Remote runs", "## Remote memory", "| before the load | 40.0 MB |", "| 2000 runs in flight | 80.0 MB |", "| 10s after the last was disposed | 44.0 MB |", "Per run in flight: 20972 bytes (20.5 KB). After ÷ before: 1.10×."} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	r.Remote = &bench.RemoteResult{Memory: r.Remote.Memory}
	if md := markdown(r); strings.Contains(md, "## Remote runs") || !strings.Contains(md, "## Remote memory") {
		t.Errorf("memory alone: the report shows an empty remote runs table or no memory:\n%s", md)
	}
}

// -merge: a goal whose figures the run did not change keeps its earlier
// verdict (a figure missing then reads 0 in results.json and must not
// count as measured now); a goal with new figures is judged again; the
// report says what was measured again when.
func TestMergeKeepsTheVerdictsOfFiguresItDidNotMeasure(t *testing.T) {
	earlier := figures()
	earlier.Latencies.Isolation.Ratio = math.NaN() // not measured then
	earlier.Remote.Memory = nil
	earlier.Goals = goals(earlier)
	zeroNonFinite(reflect.ValueOf(&earlier))
	data, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if g := judged(r)["listener-isolation"]; !g.Met {
		t.Fatalf("the test needs a 0 that meets its goal when judged again: %+v", g)
	}
	base := goals(r)
	r.Remote.Memory = figures().Remote.Memory
	r.Merged = []Rerun{{Date: "2026-12-05T00:00:00Z", Machine: Machine{Cores: 2, Go: "go1.26.8", OS: "linux/amd64"}, Sections: []string{"remote-memory"}, Seconds: 31}}
	r.Goals = keepVerdicts(r.Goals, base, goals(r))
	got := map[string]Goal{}
	for _, g := range r.Goals {
		got[g.ID] = g
	}
	if g := got["listener-isolation"]; g.Met || !g.Checks[0].Missing {
		t.Errorf("listener-isolation after the merge: %+v, want not measured, as judged then", g)
	}
	if g := got["remote-memory"]; !g.Met || g.Checks[0].Missing {
		t.Errorf("remote-memory after the merge: %+v, want met on the new figures", g)
	}
	if len(r.Goals) != len(allGoals) {
		t.Errorf("%d goals, want %d", len(r.Goals), len(allGoals))
	}
	if md := markdown(r); !strings.Contains(md, "Measured again 2026-12-05T00:00:00Z · 2 cores ·  · go1.26.8 · linux/amd64 · 31 s: sections remote-memory (`-only remote-memory -merge`); the rest is from the run above.") {
		t.Errorf("the report does not say what was measured again:\n%s", md[:min(len(md), 800)])
	}
}
