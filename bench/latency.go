package bench

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// Distribution summarises latencies in microseconds.
type Distribution struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50Micros"`
	P99     float64 `json:"p99Micros"`
	Max     float64 `json:"maxMicros"`
}

func distribution(d []time.Duration) Distribution {
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e3 }
	return Distribution{Samples: len(d), P50: at(0.5), P99: at(0.99), Max: at(1)}
}

// Latencies are the seam's lifecycle latencies over many children.
type Latencies struct {
	// Start is Service.Start until the child is published to the caller.
	Start Distribution `json:"start"`
	// Steer is Steer on a working child until the message was admitted
	// into its next model request.
	Steer Distribution `json:"steer"`
	// Cancel is the start context's cancel until the result settled.
	Cancel Distribution `json:"cancel"`
	// Dispose is Dispose of a live child until it quiesced.
	Dispose Distribution `json:"dispose"`
	// Event is a Start call until a healthy listener received the run's
	// subagent/start, alone and beside a blocked listener.
	Event        Distribution `json:"event"`
	EventBlocked Distribution `json:"eventBesideBlocked"`
	Isolation    Isolation    `json:"isolation"`
}

// MeasureLatencies runs each measurement over runs children.
func MeasureLatencies(ctx context.Context, runs int) (Latencies, error) {
	var l Latencies
	var err error
	if l.Start, l.Dispose, err = startAndDispose(ctx, runs); err != nil {
		return l, err
	}
	if l.Cancel, err = cancelToSettle(ctx, runs); err != nil {
		return l, err
	}
	if l.Steer, err = steerToAdmit(ctx, runs); err != nil {
		return l, err
	}
	l.Event, l.EventBlocked, l.Isolation, err = eventDelivery(ctx, runs)
	return l, err
}

func startAndDispose(ctx context.Context, n int) (start, dispose Distribution, err error) {
	s, err := newSeam(ctx, parked{})
	if err != nil {
		return start, dispose, err
	}
	defer s.close()
	starts, disposes := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		r, err := s.start(ctx, "wait")
		if err != nil {
			return start, dispose, err
		}
		starts = append(starts, time.Since(t))
		t = time.Now()
		if err := r.Dispose(ctx); err != nil {
			return start, dispose, err
		}
		disposes = append(disposes, time.Since(t))
	}
	return distribution(starts), distribution(disposes), nil
}

func cancelToSettle(ctx context.Context, n int) (Distribution, error) {
	s, err := newSeam(ctx, parked{})
	if err != nil {
		return Distribution{}, err
	}
	defer s.close()
	d := make([]time.Duration, 0, n)
	for range n {
		runCtx, cancel := context.WithCancel(ctx)
		r, err := s.start(runCtx, "wait")
		if err != nil {
			cancel()
			return Distribution{}, err
		}
		t := time.Now()
		cancel()
		res, err := r.Wait(ctx)
		d = append(d, time.Since(t))
		if err == nil && res.StopReason == subagent.Completed {
			err = errAnswer
		}
		if err := r.Dispose(ctx); err != nil {
			return Distribution{}, err
		}
		if err != nil {
			return Distribution{}, err
		}
	}
	return distribution(d), nil
}

func steerToAdmit(ctx context.Context, n int) (Distribution, error) {
	// Each child works until steered; a fresh one per steer keeps the
	// history it sends its model short.
	s, err := newSeamWith(ctx, spawn.Config{Model: busy{}, Tools: []agent.Tool{noop{}}, MaxSteps: math.MaxInt})
	if err != nil {
		return Distribution{}, err
	}
	defer s.close()
	msg := []subagent.ContentBlock{subagent.Text("steer")}
	d := make([]time.Duration, 0, n)
	for range n {
		r, err := s.start(ctx, "work")
		if err != nil {
			return Distribution{}, err
		}
		t := time.Now()
		err = r.(subagent.Steerer).Steer(ctx, msg)
		d = append(d, time.Since(t))
		if derr := r.Dispose(ctx); err == nil {
			err = derr
		}
		if err != nil {
			return Distribution{}, err
		}
	}
	return distribution(d), nil
}

// Isolation compares delivery to a healthy listener alone with delivery
// to one beside a blocked listener, in rounds.
type Isolation struct {
	Rounds          int `json:"rounds"`
	SamplesPerRound int `json:"samplesPerRound"`
	// Ratio is the median over rounds of the round's median delivery
	// beside the blocked listener ÷ its median delivery alone.
	Ratio float64 `json:"ratio"`
	// Spread is the ratio's interquartile range over rounds.
	RatioQ1 float64 `json:"ratioQ1"`
	RatioQ3 float64 `json:"ratioQ3"`
}

// eventDelivery measures two Services, one with a blocked listener beside
// the healthy one, alternating sample by sample so that whatever else the
// machine does weighs on both alike. The samples come in rounds; each
// round gives a ratio of medians, and the median of those ratios is what
// a busy machine does not swamp: a burst of load moves a round's two
// sides together, and a stray round moves the median of many rounds
// little. The blocked listener's bound is above every event the probe
// makes, so it stays attached, blocked, throughout.
func eventDelivery(ctx context.Context, n int) (alone, besideBlocked Distribution, iso Isolation, err error) {
	var probes [2]*eventProbe
	for i := range probes {
		if probes[i], err = newEventProbe(ctx, i == 1); err != nil {
			return alone, besideBlocked, iso, err
		}
		defer probes[i].close()
	}
	iso.SamplesPerRound = 25
	iso.Rounds = max(1, n/iso.SamplesPerRound)
	var all [2][]time.Duration
	ratios := make([]float64, 0, iso.Rounds)
	for range iso.Rounds {
		var round [2][]float64
		for j := range iso.SamplesPerRound {
			for k := range probes {
				i := (j + k) % 2 // alternate which side goes first
				sample, err := probes[i].sample(ctx)
				if err != nil {
					return alone, besideBlocked, iso, err
				}
				all[i] = append(all[i], sample)
				round[i] = append(round[i], float64(sample))
			}
		}
		ratios = append(ratios, Median(round[1])/Median(round[0]))
	}
	iso.Ratio = Median(ratios)
	slices.Sort(ratios)
	iso.RatioQ1, iso.RatioQ3 = ratios[len(ratios)/4], ratios[len(ratios)*3/4]
	return distribution(all[0]), distribution(all[1]), iso, nil
}

// eventProbe is a Service whose parent has a healthy listener that stamps
// each subagent/start it receives, and optionally a blocked one beside it.
type eventProbe struct {
	*seam
	received chan time.Time
	close    func()
}

func newEventProbe(ctx context.Context, withBlocked bool) (*eventProbe, error) {
	s, err := newSeam(ctx, parked{})
	if err != nil {
		return nil, err
	}
	p := &eventProbe{seam: s, received: make(chan time.Time, 1)}
	unblock := make(chan struct{})
	var blocked subagent.Subscription
	if withBlocked {
		blocked = s.svc.ListenParent(s.parent.SessionID(), func(subagent.Event) error { <-unblock; return nil },
			registry.ListenBound(math.MaxInt32))
	}
	healthy := s.svc.ListenParent(s.parent.SessionID(), func(ev subagent.Event) error {
		if _, ok := ev.(subagent.RunStarted); ok {
			p.received <- time.Now()
		}
		return nil
	})
	p.close = func() {
		healthy.Release()
		close(unblock)
		if blocked != nil {
			blocked.Release()
		}
		s.close()
	}
	return p, nil
}

// sample is one Start call until the healthy listener had its start event.
func (p *eventProbe) sample(ctx context.Context) (time.Duration, error) {
	t := time.Now()
	r, err := p.start(ctx, "wait")
	if err != nil {
		return 0, err
	}
	d := (<-p.received).Sub(t)
	return d, r.Dispose(ctx)
}
