package main

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/subactor/subactor/bench"
)

// Results is one run of every benchmark.
type Results struct {
	Machine    Machine                 `json:"machine"`
	Date       string                  `json:"date"`
	Seconds    float64                 `json:"seconds"` // the whole run
	Delegation []Delegation            `json:"delegation"`
	Scale      []ScaleRow              `json:"scale"`
	StepGrowth *bench.StepGrowthResult `json:"stepGrowth,omitempty"`
	Parallel   []bench.ParallelResult  `json:"parallel"`
	Resume     []bench.ResumeResult    `json:"resume"`
	Appends    []bench.AppendRate      `json:"boltAppends"`
	ModelCall  *bench.ModelCallResult  `json:"modelCall,omitempty"`
	MainJob    *bench.MainJobResult    `json:"mainJob,omitempty"`
	Latencies  *bench.Latencies        `json:"latencies,omitempty"`
	ACP        *bench.ACPResult        `json:"acp,omitempty"`
	Goals      []Goal                  `json:"goals"`
}

// Machine is where the run happened.
type Machine struct {
	Cores int    `json:"cores"`
	CPU   string `json:"cpu,omitempty"`
	Go    string `json:"go"`
	OS    string `json:"os"`
}

// Delegation is one per-operation benchmark's cost: medians over rounds.
type Delegation struct {
	Name        string  `json:"name"`
	Rounds      int     `json:"rounds"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
}

// ScaleRow is live children at scale on one store.
type ScaleRow struct {
	Store string `json:"store"`
	bench.ScaleResult
}

// Goal is one target of the benchmark issues and whether this run met it,
// judged from figures measured in this run. Measured, Op, Target and Unit
// are the goal's first check; a goal with several figures has a check for
// each and is met when all are. A figure that was not measured (or is not
// a number) fails its check.
type Goal struct {
	ID       string  `json:"id"`
	Goal     string  `json:"goal"`
	Measured float64 `json:"measured"`
	Op       string  `json:"op"`
	Target   float64 `json:"target"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
	Checks   []Check `json:"checks"`
	Detail   string  `json:"detail,omitempty"`
}

// Check is one figure of a goal against its target.
type Check struct {
	What     string  `json:"what"`
	Measured float64 `json:"measured"`
	Op       string  `json:"op"` // "<=", ">=" or "=="
	Target   float64 `json:"target"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
	// Missing says the figure was not measured; Measured is then 0.
	Missing bool `json:"missing,omitempty"`
}

func check(what string, measured float64, op string, target float64, unit string) Check {
	c := Check{What: what, Measured: measured, Op: op, Target: target, Unit: unit}
	if math.IsNaN(measured) || math.IsInf(measured, 0) {
		c.Measured, c.Missing = 0, true
		return c
	}
	switch op {
	case "<=":
		c.Met = measured <= target
	case ">=":
		c.Met = measured >= target
	case "==":
		c.Met = measured == target
	}
	return c
}

func goal(id, text, detail string, checks ...Check) Goal {
	g := Goal{ID: id, Goal: text, Met: len(checks) > 0, Checks: checks, Detail: detail}
	for _, c := range checks {
		g.Met = g.Met && c.Met
	}
	if len(checks) > 0 {
		c := checks[0]
		g.Measured, g.Op, g.Target, g.Unit = c.Measured, c.Op, c.Target, c.Unit
	}
	return g
}

// ratio is a ÷ b, NaN unless both were measured (positive).
func ratio(a, b float64) float64 {
	if !(a > 0) || !(b > 0) {
		return math.NaN()
	}
	return a / b
}

// positive is v, NaN unless it was measured (positive).
func positive(v float64) float64 {
	if !(v > 0) {
		return math.NaN()
	}
	return v
}

func (r Results) delegation(name string) Delegation {
	for _, d := range r.Delegation {
		if d.Name == name {
			return d
		}
	}
	return Delegation{Name: name, NsPerOp: math.NaN(), BytesPerOp: math.NaN(), AllocsPerOp: math.NaN()}
}

func (r Results) parallel(parents int) bench.ParallelResult {
	for _, p := range r.Parallel {
		if p.Parents == parents {
			return p
		}
	}
	return bench.ParallelResult{Parents: parents, Speedup: math.NaN(), Start: bench.Distribution{P99: math.NaN()}}
}

func goals(r Results) []Goal {
	inline, floor := r.delegation("RawProtoactorInline"), r.delegation("RawProtoactor")
	spawn, async := r.delegation("SubactorSpawn"), r.delegation("SubactorSpawnAsync")
	parent, eino := r.delegation("SubactorParentRun"), r.delegation("EinoAgentTool")
	cold, sys := r.delegation("ColdStart"), r.delegation("NewSystem")
	var g []Goal
	g = append(g,
		goal("eino-time", "a parent run with one delegation takes at least 5× less time than Eino's (SubactorParentRun vs EinoAgentTool)",
			fmt.Sprintf("%.1f µs against %.1f µs", parent.NsPerOp/1e3, eino.NsPerOp/1e3),
			check("Eino ÷ subactor, time", ratio(eino.NsPerOp, parent.NsPerOp), ">=", 5, "×")),
		goal("eino-allocs", "a parent run with one delegation makes at least 5× fewer allocations than Eino's",
			fmt.Sprintf("%.0f allocations against %.0f (bytes: %.0f against %.0f)", parent.AllocsPerOp, eino.AllocsPerOp, parent.BytesPerOp, eino.BytesPerOp),
			check("Eino ÷ subactor, allocations", ratio(eino.AllocsPerOp, parent.AllocsPerOp), ">=", 5, "×")),
		goal("floor", "a delegation (SubactorSpawn) within 3× the raw protoactor floor on the inline mailbox subactor's actors use",
			fmt.Sprintf("%.1f µs against %.1f µs; on the default dispatcher the floor is %.1f µs (%.2f×); with the child on a goroutine of its own (SubactorSpawnAsync) %.1f µs (%.2f× the inline floor)",
				spawn.NsPerOp/1e3, inline.NsPerOp/1e3, floor.NsPerOp/1e3, spawn.NsPerOp/floor.NsPerOp, async.NsPerOp/1e3, async.NsPerOp/inline.NsPerOp),
			check("SubactorSpawn ÷ inline floor", ratio(spawn.NsPerOp, inline.NsPerOp), "<=", 3, "×")),
	)
	worst, worstG, detail := math.NaN(), math.NaN(), "not measured"
	for _, s := range r.Scale {
		if s.Store != "memory" {
			continue
		}
		if per := s.HeapBytesPerChild + s.StackBytesPerChild; !(per <= worst) {
			worst = per
			detail = fmt.Sprintf("worst at %d children: %.0f B heap + %.0f B stack", s.Children, s.HeapBytesPerChild, s.StackBytesPerChild)
		}
		if !(s.GoroutinesPerChild <= worstG) {
			worstG = s.GoroutinesPerChild
		}
	}
	g = append(g, goal("child-memory", "at most 8 KiB per parked live child, heap and stack together", detail,
		check("heap + stack per child", positive(worst), "<=", 8192, "B")))
	if sg := r.StepGrowth; sg != nil {
		g = append(g, goal("step-growth", fmt.Sprintf("step %d of a child costs within 1.5× of step %d, time and bytes (model of constant cost)", sg.Late.Step, sg.Early.Step),
			fmt.Sprintf("step %d: %.1f µs, %.0f B; step %d: %.1f µs, %.0f B", sg.Early.Step, sg.Early.Nanos/1e3, sg.Early.Bytes, sg.Late.Step, sg.Late.Nanos/1e3, sg.Late.Bytes),
			check("time, late ÷ early", ratio(sg.Late.Nanos, sg.Early.Nanos), "<=", 1.5, "×"),
			check("bytes, late ÷ early", ratio(sg.Late.Bytes, sg.Early.Bytes), "<=", 1.5, "×")))
	} else {
		g = append(g, goal("step-growth", "step 400 of a child costs within 1.5× of step 10", "not measured",
			check("time, late ÷ early", math.NaN(), "<=", 1.5, "×")))
	}
	g = append(g, goal("cold-start", "a new Service and provider and its first delegation on a running System: at most 1 ms and 200 KB",
		fmt.Sprintf("%.0f allocations; actors.NewSystem alone: %.2f ms, %.0f KB, %.0f allocations", cold.AllocsPerOp, sys.NsPerOp/1e6, sys.BytesPerOp/1e3, sys.AllocsPerOp),
		check("time", positive(cold.NsPerOp)/1e3, "<=", 1000, "µs"),
		check("bytes", positive(cold.BytesPerOp), "<=", 200_000, "B")))
	p4, p64 := r.parallel(4), r.parallel(64)
	g = append(g, goal("parallel", "4 parents delegating at once reach at least 1.6× the throughput of one (2 cores)",
		fmt.Sprintf("p99 start latency at 64 parents: %.0f µs", p64.Start.P99),
		check("throughput at 4 ÷ at 1", p4.Speedup, ">=", 1.6, "×")))
	iso := math.NaN()
	isoDetail := "not measured"
	if l := r.Latencies; l != nil {
		iso = l.Isolation.Ratio
		isoDetail = fmt.Sprintf("median over %d rounds of %d samples a side (interquartile %.2f–%.2f); p50 %.1f µs alone, %.1f µs beside; p99 %.0f µs alone, %.0f µs beside",
			l.Isolation.Rounds, l.Isolation.SamplesPerRound, l.Isolation.RatioQ1, l.Isolation.RatioQ3, l.Event.P50, l.EventBlocked.P50, l.Event.P99, l.EventBlocked.P99)
	}
	g = append(g, goal("listener-isolation", "delivery to a healthy listener beside a blocked one within 10% of delivery alone", isoDetail,
		check("beside ÷ alone", iso, "<=", 1.10, "×")))
	if m := r.MainJob; m != nil && m.Error == "" {
		g = append(g, goal("main-job", "node run's survey of a generated tree within 1.5× of find | xargs cat | wc -lc on it, same totals",
			fmt.Sprintf("%d files, %.0f MB: node %.3f s, pipeline %.3f s (medians of %d rounds; with sessions in memory, no fsync: %.3f s, %.2f×); lines %d = wc -l %d + %d files without a final newline",
				m.Tree.Files, float64(m.Tree.Bytes)/1e6, m.NodeSecs, m.PipeSecs, m.Rounds, m.MemorySecs, m.MemoryRatio, m.NodeLines, m.PipeLines, m.Tree.Unterminated),
			check("node ÷ pipeline, time", m.Ratio, "<=", 1.5, "×"),
			check("files", float64(m.NodeFiles), "==", float64(m.Tree.Files), ""),
			check("bytes", float64(m.NodeBytes), "==", float64(m.PipeBytes), "B")))
	} else {
		why := "not measured"
		if m != nil {
			why = m.Error
		}
		g = append(g, goal("main-job", "node run's survey of a generated tree within 1.5× of find | xargs cat | wc -lc on it, same totals", why,
			check("node ÷ pipeline, time", math.NaN(), "<=", 1.5, "×")))
	}
	dispose := math.NaN()
	if l := r.Latencies; l != nil {
		dispose = positive(l.Dispose.P99)
	}
	g = append(g,
		goal("dispose-p99", "dispose p99 under 1 ms for an in-process child", "", check("p99", dispose, "<=", 1000, "µs")),
		goal("goroutines-per-child", "at most one goroutine per parked live child", "", check("goroutines per child", positive(worstG), "<=", 1, "")),
	)
	return g
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func fmtFigure(v float64, unit string) string {
	switch {
	case unit == "B" && v >= 10_000:
		return fmt.Sprintf("%.0f B", v)
	case unit == "×":
		return fmt.Sprintf("%.2f×", v)
	case unit == "":
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func markdown(r Results) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# subactor benchmarks\n\n")
	w("%s · %d cores · %s · %s · %s · the whole run took %.0f s\n\n", r.Date, r.Machine.Cores, r.Machine.CPU, r.Machine.Go, r.Machine.OS, r.Seconds)
	w("Produced by `bench/run.sh` (`go run ./cmd/bench`). Per-operation figures are medians over interleaved rounds; distributions are over many samples. Every goal is judged from figures measured in this run (results.json has each goal's checks).\n\n")
	w("## Goals\n\n| id | goal | measured | target | met | detail |\n|---|---|---|---|---|---|\n")
	for _, g := range r.Goals {
		var measured, target []string
		for _, c := range g.Checks {
			m := fmtFigure(c.Measured, c.Unit)
			if c.Missing {
				m = "not measured"
			}
			measured = append(measured, c.What+": "+m)
			target = append(target, c.Op+" "+fmtFigure(c.Target, c.Unit))
		}
		mark := "yes"
		if !g.Met {
			mark = "**no**"
		}
		w("| `%s` | %s | %s | %s | %s | %s |\n", g.ID, cell(g.Goal), cell(strings.Join(measured, "; ")), cell(strings.Join(target, "; ")), mark, cell(g.Detail))
	}
	inline, eino := r.delegation("RawProtoactorInline"), r.delegation("EinoAgentTool")
	w("\n## Per delegation\n\n")
	w("RawProtoactor and RawProtoactorInline are the floor: spawn an actor, one request/response, poison it, on protoactor's default dispatcher and on the inline mailbox subactor's own actors use (actors.InlineProps: messages handled on the sender's goroutine). SubactorSpawn is one foreground delegation through the Service, as the delegate tool makes it: start (StartRequest.Foreground)→result→dispose on the scripted model with in-memory sessions, the child running inside the Wait on the caller's goroutine, as the floor's actor handles its request on the caller's; SubactorSpawnAsync the same with the child on a goroutine of its own (a caller that does not wait at once); SubactorSpawnBolt is SubactorSpawn with sessions in the bbolt store. SubactorParentRun and EinoAgentTool are the same work on both runtimes: a parent run whose scripted model calls one child (the delegate tool; adk.NewAgentTool, the Eino agent built once outside the timed loop) that answers at once, then answers with the tool's result as it came (neither side's model decodes anything); SubactorParentRunBolt is SubactorParentRun on the bbolt store.\n\n")
	w("| implementation | time/op | bytes/op | allocs/op | × inline floor (time) | Eino ÷ this (time / allocs) |\n|---|---|---|---|---|---|\n")
	for _, d := range r.Delegation {
		switch d.Name {
		case "ColdStart", "ColdStartWithSystem", "NewSystem":
			continue
		}
		w("| %s | %.1f µs | %.0f | %.0f | %.2f | %.1f / %.1f |\n", d.Name, d.NsPerOp/1e3, d.BytesPerOp, d.AllocsPerOp,
			d.NsPerOp/inline.NsPerOp, eino.NsPerOp/d.NsPerOp, eino.AllocsPerOp/d.AllocsPerOp)
	}
	w("\n## Cold start\n\nColdStart: a new in-memory store, Service, spawn provider and parent agent on a System that already runs, and the first delegation start→result→dispose. ColdStartWithSystem adds a new System of its own; NewSystem is actors.NewSystem alone (protoactor builds its process registry, 1,024 concurrent maps of 32 shards, in every new actor system). Teardown is not timed.\n\n")
	w("| what | time/op | bytes/op | allocs/op |\n|---|---|---|---|\n")
	for _, name := range []string{"ColdStart", "ColdStartWithSystem", "NewSystem"} {
		d := r.delegation(name)
		w("| %s | %.1f µs | %.0f | %.0f |\n", name, d.NsPerOp/1e3, d.BytesPerOp, d.AllocsPerOp)
	}
	w("\n## Live children at scale\n\nChildren started through the Service, each parked on its model call; heap and stack after GC once all are parked, per child. On bbolt every start is an fsynced session create, and every dispose an fsynced stop record.\n\n")
	w("| store | live children | heap/child | stack/child | heap+stack | goroutines/child | starts/s | dispose all |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Scale {
		w("| %s | %d | %.0f B | %.0f B | %.0f B | %.2f | %.0f | %.2f s |\n", s.Store, s.Children, s.HeapBytesPerChild, s.StackBytesPerChild,
			s.HeapBytesPerChild+s.StackBytesPerChild, s.GoroutinesPerChild, s.StartsPerSecond, s.DisposeAllSeconds)
	}
	if sg := r.StepGrowth; sg != nil {
		w("\n## Cost per step of a long-running child\n\nA child whose model (of constant cost, it never reads the history) calls a no-op tool at every step; a step is from one model call to the next: committing the answer, the tool call, committing its result, taking the next request. Medians over %d children (and as many counting bytes with exact memory statistics), each %d steps; the goal's figures are medians over ±%s steps round each step.\n\n", sg.Children, sg.Steps, "5")
		w("| step | time | bytes |\n|---|---|---|\n")
		for _, c := range sg.Curve {
			w("| %d | %.1f µs | %.0f |\n", c.Step, c.Nanos/1e3, c.Bytes)
		}
	}
	if len(r.Parallel) > 0 {
		w("\n## Parents delegating at once\n\nEach parent a goroutine delegating start→result→dispose to a scripted child in a loop, all on one Service; the parent counts interleaved in every round. Throughput is the median over rounds, the speed-up the median of per-round ratios to one parent.\n\n")
		w("| parents | delegations/s | × one parent | start p50 | start p99 | start max |\n|---|---|---|---|---|---|\n")
		for _, p := range r.Parallel {
			w("| %d | %.0f | %.2f | %.1f µs | %.0f µs | %.0f µs |\n", p.Parents, p.DelegationsPerSecond, p.Speedup, p.Start.P50, p.Start.P99, p.Start.Max)
		}
	}
	if len(r.Resume) > 0 {
		w("\n## Resume from disk\n\nA child in the bbolt store resumed through the Service (its log loaded, its descriptor folded, its history rebuilt, the new prompt fsynced) until its model is first called.\n\n")
		w("| turns of history | history bytes | samples | p50 | p99 |\n|---|---|---|---|---|\n")
		for _, x := range r.Resume {
			w("| %d | %d | %d | %.0f µs | %.0f µs |\n", x.Turns, x.Bytes, x.First.Samples, x.First.P50, x.First.P99)
		}
	}
	if len(r.Appends) > 0 {
		w("\n## Session store (bbolt)\n\nFsynced 512-byte appends, each writer to a session of its own. With group commit, appends in flight together share one commit and fsync (persistence.Bolt batches them); without, every append commits alone (the writers take turns: the store has no switch to turn batching off, and a lone append is a commit of its own).\n\n")
		w("| writers | group commit | appends/s | latency p50 | latency p99 |\n|---|---|---|---|---|\n")
		for _, a := range r.Appends {
			w("| %d | %v | %.0f | %.0f µs | %.0f µs |\n", a.Writers, a.GroupCommit, a.AppendsPerSecond, a.Latency.P50, a.Latency.P99)
		}
	}
	if m := r.ModelCall; m != nil {
		w("\n## Model call over HTTP\n\nmodel/openai's client against the local scripted OpenAI-compatible server (model/openaitest, loopback) beside a bare net/http request for the same streamed answer, alternating, %d samples each. Bytes and allocations per call count the whole process, the server's side included (alike for both).\n\n", m.Samples)
		w("| what | p50 | p99 | bytes/call | allocs/call |\n|---|---|---|---|---|\n")
		w("| openai client | %.0f µs | %.0f µs | %.0f | %.0f |\n", m.Client.P50, m.Client.P99, m.ClientBytes, m.ClientAllocs)
		w("| bare net/http | %.0f µs | %.0f µs | %.0f | %.0f |\n", m.Bare.P50, m.Bare.P99, m.BareBytes, m.BareAllocs)
		w("| client overhead | %.0f µs | | %.0f | %.0f |\n", m.OverheadMicros, m.ClientBytes-m.BareBytes, m.ClientAllocs-m.BareAllocs)
	}
	if m := r.MainJob; m != nil {
		w("\n## Main job\n\n`node run -quiet -dir TREE` (the binary built from the main module, sessions on disk in a fresh data directory each round, and again with `-data :memory:` for reference) against `find TREE -type f -print0 | xargs -0 cat | wc -lc`, alternating, after one untimed run of each warms the page cache. The tree is generated like /usr/lib here (median file 3 KB, mean 60 KB; binaries, source text, some UTF-8 prose). The survey counts the last line of a file without a final newline, wc -l does not.\n\n")
		if m.Error != "" {
			w("Failed: %s\n", m.Error)
		} else {
			w("| tree | node (median) | pipeline (median) | node ÷ pipeline (median of rounds) | node -data :memory: | ÷ pipeline |\n|---|---|---|---|---|---|\n")
			w("| %d files, %d folders, %d bytes | %.3f s | %.3f s | %.2f | %.3f s | %.2f |\n", m.Tree.Files, m.Tree.Folders, m.Tree.Bytes, m.NodeSecs, m.PipeSecs, m.Ratio, m.MemorySecs, m.MemoryRatio)
			w("\nThe node's answer (last round): `%s`\n", m.Answer)
		}
	}
	if l := r.Latencies; l != nil {
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
	}
	if a := r.ACP; a != nil {
		w("\n## ACP child\n\nThe ACP Go SDK's example agent (`%s`, scripted, no model) as a child through the Service on the acp provider, one at a time, start→result→dispose: Start until the run is published (the process launched in its own group, initialize, session/new, the descriptor stored); the agent's turn until its answer to session/prompt (its own scripted pauses, about 5 s); exit, from that answer until the result settles (the process ended on the shutdown ladder: stdin closed, its exit awaited, reaped); and Dispose of the settled run.\n\n", bench.ExampleAgentInstall)
		if a.Skipped != "" {
			w("Skipped: %s.\n", a.Skipped)
		} else {
			w("| what | samples | p50 | p99 | max |\n|---|---|---|---|---|\n")
			for _, row := range []struct {
				name string
				d    bench.Distribution
			}{{"start", a.Start}, {"turn (the agent's)", a.Turn}, {"exit", a.Exit}, {"dispose", a.Dispose}, {"start→result→dispose", a.Total}} {
				w("| %s | %d | %.2f ms | %.2f ms | %.2f ms |\n", row.name, row.d.Samples, row.d.P50/1e3, row.d.P99/1e3, row.d.Max/1e3)
			}
		}
	}
	return b.String()
}

// zeroNonFinite replaces every NaN or infinite float64 reachable from v (a
// pointer) by 0, as JSON has no such numbers: a figure that could not be
// measured reads 0 in results.json, and the goals, judged before, already
// count it as missing.
func zeroNonFinite(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroNonFinite(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				zeroNonFinite(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			zeroNonFinite(v.Index(i))
		}
	case reflect.Float64:
		if f := v.Float(); (math.IsNaN(f) || math.IsInf(f, 0)) && v.CanSet() {
			v.SetFloat(0)
		}
	}
}
