package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/subactor/subactor/subagent"
)

// shortID is how many characters of a child's id progress lines show.
const shortID = 8

// progress prints the top agent's children from their run events: a line
// when one starts, one per model call, tool call, steer and answer, and one
// when it ends. It is a run listener: its calls come one at a time on the
// listener's own goroutine, and a run's events come in order, start first
// and end last, so no line needs holding back.
type progress struct {
	w     io.Writer
	since map[string]time.Time // by run id, until its end
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, since: map[string]time.Time{}}
}

// event is the top agent's run listener.
func (p *progress) event(ev subagent.Event) error {
	switch ev := ev.(type) {
	case subagent.RunStarted:
		p.since[ev.RunID] = time.Now()
		p.println(ev.RunID, "started")
	case subagent.RunProgress:
		if word := stepWords[ev.Kind]; word != "" && (ev.Kind != subagent.ToolCallFinished || ev.IsError) {
			line := fmt.Sprintf("step %d %s", ev.Step, word)
			if ev.Text != "" {
				first, _, _ := strings.Cut(ev.Text, "\n")
				line += " " + first
			}
			p.println(ev.RunID, line)
		}
	case subagent.RunEnded:
		elapsed := time.Since(p.since[ev.RunID]).Round(time.Microsecond)
		delete(p.since, ev.RunID)
		p.println(ev.RunID, fmt.Sprintf("ended: %s in %s", ev.StopReason, elapsed))
	case subagent.ListenerOverflow, subagent.ListenerFailed:
		fmt.Fprintf(p.w, "progress incomplete: %s\n", ev.Type())
	}
	return nil
}

// stepWords name the progress kinds a line is printed for; a finished
// tool call is shown only when it failed.
var stepWords = map[subagent.ProgressKind]string{
	subagent.ModelCallStarted: "model",
	subagent.ToolCallStarted:  "tool",
	subagent.ToolCallFinished: "failed",
	subagent.SteerAdmitted:    "steer",
	subagent.MessageText:      "final",
}

func (p *progress) println(id, line string) {
	fmt.Fprintf(p.w, "child %s %s\n", id[:min(shortID, len(id))], line)
}
