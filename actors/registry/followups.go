package registry

import (
	"slices"

	"github.com/subactor/subactor/subagent"
)

// route is one continuable child's activation slot (S8): pure, so that
// every order of follow-ups, starts, settles and ends can be tested
// without actors. One route per child id for the whole Service, so that
// one child never has two activations:
//
//   - idle: no activation. A follow-up starts one (it is answered
//     toStart and becomes the starter).
//   - starting: an activation's task is recorded or being recorded and
//     its run is being started; follow-ups queue.
//   - live: the run is there; a follow-up steers it.
//   - finishing: the run settled or refused a steer; follow-ups queue
//     until its task is terminal (its run disposed), then the first of
//     them starts the next activation and the others steer that one.
//
// A follow-up that gave up waiting (its caller's context ended) leaves the
// queue and is told the task of the activation to cancel.
type route struct {
	state   routeState
	run     subagent.Run // live: the activation's run
	task    string       // the current activation's task, once recorded
	queue   []waiterID   // follow-ups for the next activation, in arrival order
	cancels []waiterID   // gave up while starting, before the task was known
}

type routeState uint8

const (
	routeIdle routeState = iota
	routeStarting
	routeLive
	routeFinishing
)

// waiterID names one follow-up's wait on the router.
type waiterID uint64

// Inputs of a route.
type (
	routeInput interface{ routeInput() }

	// inFollowUp: a follow-up asks how to deliver (front: a follow-up
	// whose steer was refused, which came before the queued ones).
	inFollowUp struct {
		w     waiterID
		front bool
	}
	// inRecorded: the starting activation's task is recorded.
	inRecorded struct{ task string }
	// inActivated: the starting activation's run is live.
	inActivated struct{ run subagent.Run }
	// inStartFailed: the starting activation did not start.
	inStartFailed struct{ task string }
	// inRunSettled: the activation of task settled.
	inRunSettled struct{ task string }
	// inRefused: run refused a steer: it is ending.
	inRefused struct{ run subagent.Run }
	// inEnded: the activation of task is terminal, its run disposed.
	inEnded struct{ task string }
	// inGaveUp: follow-up w stopped waiting.
	inGaveUp struct{ w waiterID }
)

func (inFollowUp) routeInput()    {}
func (inRecorded) routeInput()    {}
func (inActivated) routeInput()   {}
func (inStartFailed) routeInput() {}
func (inRunSettled) routeInput()  {}
func (inRefused) routeInput()     {}
func (inEnded) routeInput()       {}
func (inGaveUp) routeInput()      {}

// routeAnswer is what a follow-up is told: start the next activation,
// steer run (of task), or (gaveUp) cancel task, if any, as it gave up.
type routeAnswer struct {
	w       waiterID
	toStart bool
	run     subagent.Run
	gaveUp  bool
	task    string
}

// step feeds in to r and returns the answers it releases.
func (r *route) step(in routeInput) []routeAnswer {
	switch in := in.(type) {
	case inFollowUp:
		switch r.state {
		case routeIdle:
			r.state, r.task = routeStarting, ""
			return []routeAnswer{{w: in.w, toStart: true}}
		case routeLive:
			return []routeAnswer{{w: in.w, run: r.run, task: r.task}}
		}
		if in.front {
			r.queue = slices.Insert(r.queue, 0, in.w)
		} else {
			r.queue = append(r.queue, in.w)
		}
	case inRecorded:
		if r.state != routeStarting || r.task != "" {
			return nil
		}
		r.task = in.task
		out := make([]routeAnswer, len(r.cancels))
		for i, w := range r.cancels {
			out[i] = routeAnswer{w: w, gaveUp: true, task: in.task}
		}
		r.cancels = nil
		return out
	case inActivated:
		if r.state != routeStarting {
			return nil
		}
		r.state, r.run = routeLive, in.run
		out := make([]routeAnswer, len(r.queue))
		for i, w := range r.queue {
			out[i] = routeAnswer{w: w, run: in.run, task: r.task}
		}
		r.queue = nil
		return out
	case inStartFailed:
		// Only the starter sends it, with the task it recorded ("" when
		// none): a start that failed after its task ended moved on already.
		if r.state == routeStarting && r.task == in.task {
			return r.next()
		}
	case inRunSettled:
		if r.state == routeLive && r.task == in.task {
			r.state = routeFinishing
		}
	case inRefused:
		if r.state == routeLive && r.run == in.run {
			r.state = routeFinishing
		}
	case inEnded:
		if (r.state == routeLive || r.state == routeFinishing || r.state == routeStarting) && r.task == in.task {
			return r.next()
		}
	case inGaveUp:
		if i := slices.Index(r.queue, in.w); i >= 0 {
			r.queue = slices.Delete(r.queue, i, i+1)
			if r.state == routeStarting && r.task == "" {
				r.cancels = append(r.cancels, in.w)
				return nil
			}
			return []routeAnswer{{w: in.w, gaveUp: true, task: r.task}}
		}
	}
	return nil
}

// next ends the current activation: the first queued follow-up starts the
// next one, or the route is idle. Those that gave up before its task was
// known have nothing left to cancel.
func (r *route) next() []routeAnswer {
	out := make([]routeAnswer, 0, len(r.cancels)+1)
	for _, w := range r.cancels {
		out = append(out, routeAnswer{w: w, gaveUp: true})
	}
	r.cancels, r.run, r.task = nil, nil, ""
	if len(r.queue) == 0 {
		r.state = routeIdle
		return out
	}
	r.state = routeStarting
	out = append(out, routeAnswer{w: r.queue[0], toStart: true})
	r.queue = r.queue[1:]
	return out
}

// idle reports whether r holds nothing: the router forgets it.
func (r *route) idle() bool { return r.state == routeIdle && len(r.queue) == 0 && len(r.cancels) == 0 }
