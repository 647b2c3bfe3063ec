package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// StepCost is what one step of a child's loop costs at a given step.
type StepCost struct {
	Step  int     `json:"step"`
	Nanos float64 `json:"nanos"`
	Bytes float64 `json:"bytes"`
}

// StepGrowthResult is the cost of a late step of a child beside an early
// one, medians over several children and a window of steps around each.
type StepGrowthResult struct {
	Children int        `json:"children"`
	Steps    int        `json:"steps"`
	Curve    []StepCost `json:"curve"`
	Early    StepCost   `json:"early"`
	Late     StepCost   `json:"late"`
	// TimeRatio and BytesRatio are Late ÷ Early.
	TimeRatio  float64 `json:"timeRatio"`
	BytesRatio float64 `json:"bytesRatio"`
}

// stepper is a model of constant cost: it calls the noop tool until step
// n, then answers. At each call it stamps the time, or (counting bytes)
// the bytes allocated so far, into preallocated slices, so a step's cost
// is what the loop did between two calls (committing the answer, calling
// the tool, committing its result, taking the next request) plus the
// model's own constant work. It never reads the history. Bytes come from
// runtime.ReadMemStats, exact but slow, so they are counted in runs of
// their own.
type stepper struct {
	n      int
	bytes  bool
	calls  int
	stamps []time.Time
	allocs []uint64
	ms     runtime.MemStats
}

func newStepper(n int, bytes bool) *stepper {
	return &stepper{n: n, bytes: bytes, stamps: make([]time.Time, 0, n+1), allocs: make([]uint64, 0, n+1)}
}

func (s *stepper) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	if s.bytes {
		runtime.ReadMemStats(&s.ms)
		s.allocs = append(s.allocs, s.ms.TotalAlloc)
	} else {
		s.stamps = append(s.stamps, time.Now())
	}
	s.calls++
	if s.calls > s.n {
		return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("done")}}}, ctx.Err()
	}
	return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: "n", Name: "noop", Args: []byte(`{}`)}}}}, ctx.Err()
}

// StepGrowth runs children children of steps tool-calling steps each, one
// at a time (and as many again counting bytes), and compares the cost of step late with step early: each a
// median over the children of the median over the steps within window of
// it. Step k's cost is the time and bytes from model call k to call k+1.
func StepGrowth(ctx context.Context, children, steps, early, late, window int) (StepGrowthResult, error) {
	if early-window < 1 || late+window >= steps+1 {
		return StepGrowthResult{}, fmt.Errorf("steps %d too few for a window of %d round step %d", steps, window, late)
	}
	s, err := newSeamWith(ctx, spawn.Config{Model: &stepper{}, Tools: []agent.Tool{noop{}}, MaxSteps: steps + 1})
	if err != nil {
		return StepGrowthResult{}, err
	}
	defer s.close()
	points := []int{1, 2, 5, 10, 20, 50, 100, 200, 400, 800, 1600}
	// Children alternate: one stamps times, the next counts bytes into
	// the same row.
	var times [][]StepCost
	for c := range 2 * children {
		m := newStepper(steps, c%2 == 1)
		prov, err := spawn.New(spawn.Config{Name: "steps", System: s.sys, Store: s.store, Model: m, Tools: []agent.Tool{noop{}}, MaxSteps: steps + 1})
		if err != nil {
			return StepGrowthResult{}, err
		}
		release, err := s.svc.RegisterProvider(prov)
		if err != nil {
			return StepGrowthResult{}, err
		}
		run, err := s.svc.Start(ctx, "steps", subagent.StartRequest{Parent: s.parent, Prompt: []subagent.ContentBlock{subagent.Text("work")}})
		if err != nil {
			release()
			return StepGrowthResult{}, err
		}
		res, err := run.Wait(ctx)
		if derr := run.Dispose(ctx); err == nil {
			err = derr
		}
		release()
		if err == nil && (res.StopReason != subagent.Completed || m.calls != steps+1) {
			err = fmt.Errorf("child ended %s after %d model calls: %s", res.StopReason, m.calls, res.Detail)
		}
		if err != nil {
			return StepGrowthResult{}, err
		}
		if !m.bytes {
			times = append(times, make([]StepCost, steps+1))
		}
		costs := times[len(times)-1] // costs[k] for step k, 1-based
		for k := 1; k <= steps; k++ {
			costs[k].Step = k
			if m.bytes {
				costs[k].Bytes = float64(m.allocs[k] - m.allocs[k-1])
			} else {
				costs[k].Nanos = float64(m.stamps[k].Sub(m.stamps[k-1]))
			}
		}
	}
	per := times
	at := func(step, window int) StepCost {
		var ns, bs []float64
		for _, costs := range per {
			var cn, cb []float64
			for k := max(1, step-window); k <= min(steps, step+window); k++ {
				cn, cb = append(cn, costs[k].Nanos), append(cb, costs[k].Bytes)
			}
			ns, bs = append(ns, Median(cn)), append(bs, Median(cb))
		}
		return StepCost{Step: step, Nanos: Median(ns), Bytes: Median(bs)}
	}
	r := StepGrowthResult{Children: children, Steps: steps, Early: at(early, window), Late: at(late, window)}
	for _, p := range points {
		if p <= steps {
			r.Curve = append(r.Curve, at(p, 0))
		}
	}
	r.TimeRatio, r.BytesRatio = r.Late.Nanos/r.Early.Nanos, r.Late.Bytes/r.Early.Bytes
	slices.SortFunc(r.Curve, func(a, b StepCost) int { return a.Step - b.Step })
	return r, nil
}
