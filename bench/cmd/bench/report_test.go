package main

import (
	"strings"
	"testing"

	"github.com/subactor/subactor/bench"
)

func TestGoalsJudgeTheFiguresAndTheReportShowsThem(t *testing.T) {
	r := Results{
		Delegation: []Delegation{
			{Name: "RawProtoactor", NsPerOp: 20_000, AllocsPerOp: 40},
			{Name: "SubactorSpawn", NsPerOp: 40_000, AllocsPerOp: 130},
			{Name: "SubactorParentRun", NsPerOp: 80_000, AllocsPerOp: 250},
			{Name: "EinoAgentTool", NsPerOp: 180_000, AllocsPerOp: 1200},
		},
		Scale:     []bench.ScaleResult{{Children: 100_000, HeapBytesPerChild: 9000, GoroutinesPerChild: 1}},
		Appends:   []bench.AppendRate{{Writers: 16, AppendsPerSecond: 8000}},
		Latencies: bench.Latencies{Dispose: bench.Distribution{P99: 50}, Event: bench.Distribution{P99: 100}, EventBlocked: bench.Distribution{P99: 105}},
	}
	met := map[string]bool{}
	for _, g := range goals(r) {
		met[g.Goal] = g.Met
	}
	for goal, want := range map[string]bool{
		"per-delegation time within 3× the raw protoactor floor":                       true,
		"at least 5× less time than Eino":                                              false,
		"at least 5× fewer allocations than Eino":                                      true,
		"at most 8 KiB heap per parked live child":                                     false,
		"at most one goroutine per parked live child":                                  true,
		"100k live children on one node":                                               true,
		"dispose p99 under 1 ms for an in-process child":                               true,
		"event delivery p99 to a healthy listener within 10% while another is blocked": true,
	} {
		if got, ok := met[goal]; !ok || got != want {
			t.Errorf("goal %q: met %v (present %v), want %v", goal, got, ok, want)
		}
	}
	r.Goals = goals(r)
	md := markdown(r)
	for _, want := range []string{"| SubactorSpawn | 40.0 µs |", "| 100000 | 9000 B |", "| 16 | 8000 |", "**no**"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
