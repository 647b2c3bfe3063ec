package main

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/subactor/subactor/bench"
)

// figures is a complete run whose figures meet every goal.
func figures() Results {
	return Results{
		Delegation: []Delegation{
			{Name: "RawProtoactor", NsPerOp: 10_000, AllocsPerOp: 40},
			{Name: "RawProtoactorInline", NsPerOp: 5_000, AllocsPerOp: 45},
			{Name: "SubactorSpawn", NsPerOp: 14_000, BytesPerOp: 9000, AllocsPerOp: 130},
			{Name: "SubactorParentRun", NsPerOp: 50_000, AllocsPerOp: 200},
			{Name: "EinoAgentTool", NsPerOp: 300_000, AllocsPerOp: 1200},
			{Name: "ColdStart", NsPerOp: 60_000, BytesPerOp: 16_000, AllocsPerOp: 230},
			{Name: "NewSystem", NsPerOp: 2_500_000, BytesPerOp: 2_900_000, AllocsPerOp: 66_000},
		},
		Scale: []ScaleRow{
			{"memory", bench.ScaleResult{Children: 1000, HeapBytesPerChild: 3000, StackBytesPerChild: 4000, GoroutinesPerChild: 1}},
			{"memory", bench.ScaleResult{Children: 100_000, HeapBytesPerChild: 3500, StackBytesPerChild: 4096, GoroutinesPerChild: 1}},
			{"bbolt", bench.ScaleResult{Children: 1000, HeapBytesPerChild: 9000, StackBytesPerChild: 8192, GoroutinesPerChild: 1}},
		},
		StepGrowth: &bench.StepGrowthResult{Early: bench.StepCost{Step: 10, Nanos: 5000, Bytes: 3000}, Late: bench.StepCost{Step: 400, Nanos: 5500, Bytes: 3000}},
		Parallel: []bench.ParallelResult{
			{Parents: 1, Speedup: 1}, {Parents: 4, Speedup: 1.7}, {Parents: 64, Speedup: 1.5, Start: bench.Distribution{P99: 900}},
		},
		Latencies: &bench.Latencies{Dispose: bench.Distribution{P99: 50}, Isolation: bench.Isolation{Ratio: 1.02}},
		MainJob: &bench.MainJobResult{Tree: bench.TreeTotals{Files: 10, Bytes: 1000}, Ratio: 1.2,
			NodeFiles: 10, NodeBytes: 1000, PipeBytes: 1000},
	}
}

var allGoals = []string{"eino-time", "eino-allocs", "floor", "child-memory", "step-growth", "cold-start", "parallel",
	"listener-isolation", "main-job", "dispose-p99", "goroutines-per-child"}

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
		"eino-time":   func(r *Results) { r.Delegation[3].NsPerOp = 61_000 }, // 300/61 < 5
		"eino-allocs": func(r *Results) { r.Delegation[3].AllocsPerOp = 241 },
		"floor":       func(r *Results) { r.Delegation[1].NsPerOp = 4_000 }, // 14/4 > 3, though 14/10 is not
		"child-memory": func(r *Results) {
			r.Scale[1].StackBytesPerChild = 8192 // heap alone would pass
		},
		"step-growth": func(r *Results) { r.StepGrowth.Late.Bytes = 4501 },
		"cold-start":  func(r *Results) { r.Delegation[5].BytesPerOp = 200_001 },
		"parallel":    func(r *Results) { r.Parallel[1].Speedup = 1.59 },
		"listener-isolation": func(r *Results) {
			r.Latencies.Isolation.Ratio = 1.11
		},
		"main-job":             func(r *Results) { r.MainJob.NodeBytes = 999 }, // fast but wrong
		"dispose-p99":          func(r *Results) { r.Latencies.Dispose.P99 = 1001 },
		"goroutines-per-child": func(r *Results) { r.Scale[0].GoroutinesPerChild = 2 },
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
	r.Delegation[3].NsPerOp = 100_000
	r.Goals = goals(r)
	md := markdown(r)
	for _, want := range []string{"| SubactorSpawn | 14.0 µs |", "| memory | 100000 | 3500 B | 4096 B | 7596 B |", "| `eino-time` |", "**no**", "| `main-job` |", "find \\| xargs cat \\| wc -lc"} {
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
