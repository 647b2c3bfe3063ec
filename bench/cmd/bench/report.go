package main

import (
	"fmt"
	"strings"

	"github.com/subactor/subactor/bench"
)

// Results is one run of every benchmark.
type Results struct {
	Machine    Machine             `json:"machine"`
	Date       string              `json:"date"`
	Delegation []Delegation        `json:"delegation"`
	Scale      []bench.ScaleResult `json:"scale"`
	Appends    []bench.AppendRate  `json:"boltAppends"`
	Latencies  bench.Latencies     `json:"latencies"`
	Goals      []Goal              `json:"goals"`
}

// Machine is where the run happened.
type Machine struct {
	Cores int    `json:"cores"`
	CPU   string `json:"cpu,omitempty"`
	Go    string `json:"go"`
	OS    string `json:"os"`
}

// Delegation is one implementation's cost per delegation.
type Delegation struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
}

// Goal is one target of the benchmark issue and whether this run met it.
type Goal struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func (r Results) delegation(name string) Delegation {
	for _, d := range r.Delegation {
		if d.Name == name {
			return d
		}
	}
	return Delegation{}
}

func goals(r Results) []Goal {
	floor, spawn, parent, eino := r.delegation("RawProtoactor"), r.delegation("SubactorSpawn"), r.delegation("SubactorParentRun"), r.delegation("EinoAgentTool")
	g := []Goal{
		{"per-delegation time within 3× the raw protoactor floor", fmt.Sprintf("%.2f×", spawn.NsPerOp/floor.NsPerOp), spawn.NsPerOp <= 3*floor.NsPerOp},
		{"at least 5× less time than Eino", fmt.Sprintf("%.1f× (parent run to parent run: %.1f×)", eino.NsPerOp/spawn.NsPerOp, eino.NsPerOp/parent.NsPerOp), eino.NsPerOp >= 5*spawn.NsPerOp},
		{"at least 5× fewer allocations than Eino", fmt.Sprintf("%.1f× (parent run to parent run: %.1f×)", eino.AllocsPerOp/spawn.AllocsPerOp, eino.AllocsPerOp/parent.AllocsPerOp), eino.AllocsPerOp >= 5*spawn.AllocsPerOp},
	}
	if len(r.Scale) > 0 {
		largest := r.Scale[len(r.Scale)-1]
		worstHeap, worstG := 0.0, 0.0
		for _, s := range r.Scale {
			worstHeap, worstG = max(worstHeap, s.HeapBytesPerChild), max(worstG, s.GoroutinesPerChild)
		}
		g = append(g,
			Goal{"at most 8 KiB heap per parked live child", fmt.Sprintf("%.0f B", worstHeap), worstHeap <= 8192},
			Goal{"at most one goroutine per parked live child", fmt.Sprintf("%.2f", worstG), worstG <= 1},
			Goal{"100k live children on one node", fmt.Sprintf("%d", largest.Children), largest.Children >= 100_000},
		)
	}
	l := r.Latencies
	g = append(g,
		Goal{"dispose p99 under 1 ms for an in-process child", fmt.Sprintf("%.0f µs", l.Dispose.P99), l.Dispose.P99 < 1000},
		Goal{"event delivery p99 to a healthy listener within 10% while another is blocked",
			fmt.Sprintf("%.0f µs alone, %.0f µs beside a blocked one", l.Event.P99, l.EventBlocked.P99), l.EventBlocked.P99 <= 1.1*l.Event.P99},
	)
	return g
}

func markdown(r Results) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# subactor benchmarks\n\n")
	w("%s · %d cores · %s · %s · %s\n\n", r.Date, r.Machine.Cores, r.Machine.CPU, r.Machine.Go, r.Machine.OS)
	w("Produced by `bench/run.sh` (`go run ./cmd/bench`); figures are medians of repeated runs, or distributions over many children.\n\n")
	w("## Goals\n\n| goal | measured | met |\n|---|---|---|\n")
	for _, g := range r.Goals {
		mark := "yes"
		if !g.Met {
			mark = "**no**"
		}
		w("| %s | %s | %s |\n", g.Goal, g.Measured, mark)
	}
	floor, eino := r.delegation("RawProtoactor"), r.delegation("EinoAgentTool")
	w("\n## Per delegation\n\n")
	w("RawProtoactor is the floor: spawn an actor, one request/response, poison it. SubactorSpawn is one child through the Service: start→result→dispose on the scripted model with in-memory sessions. SubactorSpawnBolt is the same with sessions in the bbolt store. SubactorParentRun and EinoAgentTool are the same work on both runtimes: a parent run whose scripted model calls one child (the delegate tool; adk.NewAgentTool) that answers at once.\n\n")
	w("| implementation | time/op | bytes/op | allocs/op | × floor (time) | Eino ÷ this (time / allocs) |\n|---|---|---|---|---|---|\n")
	for _, d := range r.Delegation {
		w("| %s | %.1f µs | %.0f | %.0f | %.2f | %.1f / %.1f |\n", d.Name, d.NsPerOp/1e3, d.BytesPerOp, d.AllocsPerOp,
			d.NsPerOp/floor.NsPerOp, eino.NsPerOp/d.NsPerOp, eino.AllocsPerOp/d.AllocsPerOp)
	}
	w("\n## Live children at scale\n\nChildren started through the Service, each parked on its model call; heap and stack after GC once all are parked.\n\n")
	w("| live children | heap/child | stack/child | goroutines/child | starts/s | dispose all |\n|---|---|---|---|---|---|\n")
	for _, s := range r.Scale {
		w("| %d | %.0f B | %.0f B | %.2f | %.0f | %.2f s |\n", s.Children, s.HeapBytesPerChild, s.StackBytesPerChild, s.GoroutinesPerChild, s.StartsPerSecond, s.DisposeAllSeconds)
	}
	w("\n## Session store (bbolt)\n\nFsynced 512-byte appends, each writer to a session of its own. One writer pays an fsync per append; concurrent writers share commits (group commit). SubactorSpawnBolt above is a delegation with every turn fsynced.\n\n")
	w("| writers | appends/s |\n|---|---|\n")
	for _, a := range r.Appends {
		w("| %d | %.0f |\n", a.Writers, a.AppendsPerSecond)
	}
	l := r.Latencies
	w("\n## Latencies (µs)\n\n| what | samples | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, row := range []struct {
		name string
		d    bench.Distribution
	}{
		{"start until the child is published", l.Start},
		{"steer until admitted into the next request", l.Steer},
		{"cancel until the result settles", l.Cancel},
		{"dispose until quiesced", l.Dispose},
		{"start until a healthy listener has subagent/start", l.Event},
		{"the same, beside a blocked listener", l.EventBlocked},
	} {
		w("| %s | %d | %.1f | %.1f | %.1f |\n", row.name, row.d.Samples, row.d.P50, row.d.P99, row.d.Max)
	}
	return b.String()
}
