package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// shortID is how many characters of a child's id progress lines show.
const shortID = 8

// progress prints the top agent's children: a line when one starts, one per
// step and one when it ends. Steps arrive on the children's goroutines and
// run events on a listener's, so lines are serialized. A child runs before
// Start returns, so its first steps usually come before its start event:
// they are held until then, and those of a child rolled back before it
// started are never shown.
type progress struct {
	w        io.Writer
	mu       sync.Mutex
	children map[string]*child // by child id, until its end
}

type child struct {
	since   time.Time // first seen
	started bool
	held    []string // steps before the start event
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, children: map[string]*child{}}
}

// step is the spawn provider's OnStep.
func (p *progress) step(s agent.Step) {
	line := fmt.Sprintf("step %d %s", s.N, s.Kind)
	if s.Text != "" {
		line += " " + s.Text
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.child(s.Agent); !c.started {
		c.held = append(c.held, line)
		return
	}
	p.println(s.Agent, line)
}

// event is the top agent's run listener.
func (p *progress) event(ev subagent.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case subagent.RunStarted:
		c := p.child(ev.ID)
		c.started = true
		p.println(ev.ID, "started")
		for _, line := range c.held {
			p.println(ev.ID, line)
		}
		c.held = nil
	case subagent.RunEnded:
		elapsed := time.Since(p.child(ev.ID).since).Round(time.Microsecond)
		delete(p.children, ev.ID)
		p.println(ev.ID, fmt.Sprintf("ended: %s in %s", ev.StopReason, elapsed))
	}
	return nil
}

// child returns the child id, first seen now if it is new. Called with mu
// held.
func (p *progress) child(id string) *child {
	c, ok := p.children[id]
	if !ok {
		c = &child{since: time.Now()}
		p.children[id] = c
	}
	return c
}

func (p *progress) println(id, line string) {
	fmt.Fprintf(p.w, "child %s %s\n", id[:min(shortID, len(id))], line)
}
