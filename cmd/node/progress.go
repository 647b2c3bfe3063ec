package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/subagent"
)

// topName is how progress names the top agent.
const topName = "top"

// taskShown is the most runes of a child's task its name shows.
const taskShown = 40

// shortID is how many characters of a child's id progress lines show:
// the end of it (see short).
const shortID = 12

// reporter shows a run's children as their events come: event is the top
// agent's run listener (its calls come one at a time, on the listener's
// goroutine), top is told of the top agent's own steps (from its loop's
// goroutines: see agent.Config.OnStep), close ends the display once every
// child has ended, from the goroutine that runs the command. starting shows child id starting on
// agent server name, from the goroutine that starts it, until the
// function it returns is called with how the start ended: "" when the
// child exists (its events follow), else the stop reason of a child that
// never started.
type reporter interface {
	event(ev subagent.Event) error
	top(ev subagent.RunProgress)
	starting(id, name string) (ended func(subagent.StopReason))
	close()
}

// How often a start in progress is shown again: a plain line repeats
// now and then, a live row ticks.
const (
	startingEvery = 10 * time.Second
	startTick     = time.Second
)

// every calls f every d on a goroutine of its own until the returned stop,
// which waits for it.
func every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// progress prints the top agent's children from their run events, one plain
// line each: when one starts, per model call, tool call, steer and answer,
// and when it ends. Streamed text is left out: it would flood the lines.
// A run's events come in order, start first and end last, so no line needs
// holding back. An agent server's child is shown starting before that:
// "starting <name>...", again with the time it has taken every startingEvery,
// and, when it never started, its end line. Tests parse these lines: keep
// their formats.
type progress struct {
	mu    sync.Mutex // starts are shown from other goroutines than events
	w     io.Writer
	since map[string]time.Time // by run id, until its end
	names map[string]string    // by run id, until its end: see childName
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, since: map[string]time.Time{}, names: map[string]string{}}
}

// event is the top agent's run listener.
func (p *progress) event(ev subagent.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case subagent.RunStarted:
		p.since[ev.RunID] = time.Now()
		p.names[ev.RunID] = childName(ev.RunID, ev.Task)
		p.println(ev.RunID, "started")
	case subagent.RunProgress:
		if line := stepText(ev); line != "" {
			p.println(ev.RunID, line)
		}
	case subagent.RunEnded:
		p.println(ev.RunID, endedText(ev.StopReason, p.since[ev.RunID]))
		delete(p.since, ev.RunID)
		delete(p.names, ev.RunID)
	case subagent.ListenerOverflow, subagent.ListenerFailed:
		fmt.Fprintf(p.w, "progress incomplete: %s\n", subagent.TypeOf(ev))
	}
	return nil
}

// top prints the top agent's steps as a child's are, "top step ...".
func (p *progress) top(ev subagent.RunProgress) {
	if line := stepText(ev); line != "" {
		p.mu.Lock()
		defer p.mu.Unlock()
		fmt.Fprintf(p.w, "%s %s\n", topName, clean(line))
	}
}

func (p *progress) close() {}

func (p *progress) starting(id, name string) func(subagent.StopReason) {
	begun := time.Now()
	p.locked(id, "starting "+name+"...")
	stop := every(startingEvery, func() {
		p.locked(id, fmt.Sprintf("starting %s... %s", name, time.Since(begun).Round(time.Second)))
	})
	return func(reason subagent.StopReason) {
		stop()
		if reason != "" {
			p.locked(id, endedText(reason, begun))
		}
	}
}

func (p *progress) locked(id, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.println(id, line)
}

// stepWords name the progress kinds a line is printed for; a finished
// tool call is shown only when it failed. An ACP agent's permission
// answers and plans are shown too (its streamed thoughts, like streamed
// text, are not).
var stepWords = map[subagent.ProgressKind]string{
	subagent.ModelCallStarted:  "model",
	subagent.ModelCallRetried:  "retry",
	subagent.ToolCallStarted:   "tool",
	subagent.ToolCallFinished:  "failed",
	subagent.SteerAdmitted:     "steer",
	subagent.MessageText:       "final",
	acpdata.PermissionAnswered: "permission",
	acpdata.PlanUpdated:        "plan",
}

// stepText is the plain line of a progress event after the child's id,
// "step <n> <word>[ <first line of the text>]" ("hosted by member <id>"
// for a remote run), or "" for a kind plain output leaves out.
func stepText(ev subagent.RunProgress) string {
	if ev.Kind == clusterwire.HostedBy {
		return "hosted by member " + ev.Text
	}
	word := stepWords[ev.Kind]
	if word == "" || ev.Kind == subagent.ToolCallFinished && !ev.IsError {
		return ""
	}
	line := fmt.Sprintf("step %d %s", ev.Step, word)
	if ev.Text != "" {
		line += " " + firstLine(ev.Text)
	}
	return line
}

// endedText is the line of a child's end after its id, with the time since
// it started.
func endedText(reason subagent.StopReason, since time.Time) string {
	return fmt.Sprintf("ended: %s in %s", reason, humanDuration(time.Since(since)))
}

// humanDuration is d to three significant digits at most ("412ms",
// "5.26s", "2m5s"), never 0 for a positive d.
func humanDuration(d time.Duration) string {
	unit := time.Microsecond
	switch {
	case d >= time.Minute:
		unit = time.Second
	case d >= 10*time.Second:
		unit = 100 * time.Millisecond
	case d >= time.Second:
		unit = 10 * time.Millisecond
	case d >= time.Millisecond:
		unit = time.Millisecond
	}
	return d.Round(unit).String()
}

// println prints a child's line, cleaned: its text is the child's.
func (p *progress) println(id, line string) {
	fmt.Fprintf(p.w, "%s %s\n", cmp.Or(p.names[id], childName(id, "")), clean(line))
}

// childName is how progress names a child: "child <short id>", then its
// task in brackets when the start named one ("child 0a1b2c3d4e5f [tally
// src]"), so that a person can tell the children apart.
func childName(id, task string) string {
	if task == "" {
		return "child " + short(id)
	}
	return fmt.Sprintf("child %s [%s]", short(id), clip(task, taskShown))
}

// short is how progress names a child: the last shortID characters of its
// id, the 48 random bits that end a time-ordered UUID (v7), whose head is
// the time and the same for every child started in the same minute.
func short(id string) string { return id[max(0, len(id)-shortID):] }

// Usage line and -json records of the run itself (its children's are the
// subagent events).
const (
	typeSession = "node/session"
	typeResult  = "node/result"
)

// printSession writes "session <id>" to w once the session exists, with
// asJSON its node/session record.
func printSession(w io.Writer, asJSON bool, id string) error {
	if asJSON {
		return newEncoder(w).Encode(jsonEvent{Type: typeSession, SessionID: id})
	}
	_, err := fmt.Fprintf(w, "session %s\n", id)
	return err
}

// usageLine is the run's token totals, its children's included:
//
//	usage: input=<n> output=<n> cached=<n>
func usageLine(u subagent.Usage) string {
	return fmt.Sprintf("usage: input=%d output=%d cached=%d", u.InputTokens, u.OutputTokens, u.CachedInputTokens)
}

// jsonEvent is one line of -json output: a child's run event, or the run's
// own session and result records. Fields a record does not have are left
// out.
type jsonEvent struct {
	Type                 string          `json:"type"`
	RunID                string          `json:"runId,omitempty"`
	Task                 string          `json:"task,omitempty"`
	SessionID            string          `json:"sessionId,omitempty"`
	Provider             string          `json:"provider,omitempty"`
	Local                bool            `json:"local,omitempty"`
	Kind                 string          `json:"kind,omitempty"`
	Step                 int             `json:"step,omitempty"`
	Text                 string          `json:"text,omitempty"`
	IsError              bool            `json:"isError,omitempty"`
	StopReason           string          `json:"stopReason,omitempty"`
	Detail               string          `json:"detail,omitempty"`
	LastAssistantMessage string          `json:"lastAssistantMessage,omitempty"`
	Usage                *subagent.Usage `json:"usage,omitempty"`
	// Bound is a listener overflow's, Reason a listener failure's.
	Bound  int    `json:"bound,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// jsonResult is the last line of -json output: how the top agent's run
// ended, its answer and its usage with its children's.
type jsonResult struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"sessionId"`
	StopReason string          `json:"stopReason"`
	Detail     string          `json:"detail,omitempty"`
	Answer     string          `json:"answer"`
	Usage      *subagent.Usage `json:"usage,omitempty"`
}

// jsonProgress prints every run event, streamed text included, as one JSON
// object per line.
type jsonProgress struct {
	mu  sync.Mutex // the top agent's steps come from its own goroutines
	enc *json.Encoder
}

// newEncoder writes one JSON value per line, "<" and ">" as they are, and
// no control character raw.
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(jsonControls{w})
	enc.SetEscapeHTML(false)
	return enc
}

func (p *jsonProgress) event(ev subagent.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enc.Encode(toJSON(ev))
}

// top prints the top agent's steps as subagent/progress records whose
// runId is the session's own id.
func (p *jsonProgress) top(ev subagent.RunProgress) {
	// A failed write to stdout fails the result line's too, which the
	// command reports.
	_ = p.event(ev)
}

func (p *jsonProgress) close() {}

// starting shows nothing: a child that never started has no events, and
// the result line says how the run ended.
func (p *jsonProgress) starting(string, string) func(subagent.StopReason) {
	return func(subagent.StopReason) {}
}

// toJSON maps an event onto its -json record.
func toJSON(ev subagent.Event) jsonEvent {
	j := jsonEvent{Type: subagent.TypeOf(ev)}
	switch ev := ev.(type) {
	case subagent.RunStarted:
		j.RunID, j.SessionID, j.Provider, j.Local, j.Task = ev.RunID, ev.SessionID, ev.Provider, ev.Local, ev.Task
	case subagent.RunProgress:
		j.RunID, j.Kind, j.Step, j.Text, j.IsError, j.Usage = ev.RunID, string(ev.Kind), ev.Step, ev.Text, ev.IsError, ev.Usage
	case subagent.RunEnded:
		j.RunID, j.SessionID, j.Provider, j.Local = ev.RunID, ev.SessionID, ev.Provider, ev.Local
		j.StopReason, j.LastAssistantMessage, j.Usage = string(ev.StopReason), ev.LastAssistantMessage, ev.Usage
	case subagent.ListenerOverflow:
		j.Bound = ev.Bound
	case subagent.ListenerFailed:
		j.Reason = ev.Reason
	}
	return j
}

// ANSI sequences of the live view.
const (
	// noWrap and wrap turn the terminal's line wrapping off and on
	// (DECAWM): a status line wider than the terminal is clipped instead
	// of taking two rows, which would throw the redraw's row count off.
	noWrap = "\x1b[?7l"
	wrap   = "\x1b[?7h"
	// eraseBelow erases from the cursor to the end of the screen.
	eraseBelow = "\x1b[J"
)

// Live view bounds.
const (
	// liveRows is the most children shown at once; the rest are counted
	// on one more row, so that the block fits a small terminal (cursor-up
	// cannot reach rows that scrolled away).
	liveRows = 8
	// liveText is the most runes of a child's text a row shows.
	liveText = 160
	// frame is the least time between two redraws (at most 20 a
	// second): streamed text comes a few characters an event, and a
	// survey of a large tree ends thousands of children a second.
	frame = 50 * time.Millisecond
)

// live is the view on a terminal: one status row per running child,
// redrawn in place, and a final line per child that ended, printed above
// them. It is a listener, called one event at a time; close comes from
// another goroutine, so a mutex guards the state.
type live struct {
	mu      sync.Mutex
	w       io.Writer
	running []*liveChild  // in start order
	topRow  *liveChild    // the top agent's, once it took a step
	drawn   int           // rows of the status block on the screen
	last    time.Time     // of the last redraw
	every   time.Duration // frame; tests draw every event
	tick    time.Duration // startTick; tests tick by hand
	closed  bool
	// finals are the end lines not yet printed; dirty says the screen is
	// behind, to be redrawn by due once the frame is over.
	finals []string
	dirty  bool
	due    *time.Timer
}

// liveChild is a running child's row.
type liveChild struct {
	id     string
	name   string // childName's, once the start event named the task
	since  time.Time
	step   int
	status string // what it is doing, a line
	text   string // the current model call's streamed text, its last line
}

func newLive(w io.Writer) *live { return &live{w: w, every: frame, tick: startTick} }

func (l *live) event(ev subagent.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	var final string
	switch ev := ev.(type) {
	case subagent.RunStarted:
		c := l.child(ev.RunID)
		if c == nil {
			c = &liveChild{id: ev.RunID}
			l.running = append(l.running, c)
		}
		// A starting row is taken over.
		c.since, c.status, c.name = time.Now(), "started", childName(ev.RunID, ev.Task)
	case subagent.RunProgress:
		if c := l.child(ev.RunID); c == nil || !c.update(ev) {
			return nil
		}
	case subagent.RunEnded:
		c := l.child(ev.RunID)
		since, name := time.Now(), childName(ev.RunID, "")
		if c != nil {
			since, name = c.since, c.rowName()
			l.running = slices.DeleteFunc(l.running, func(r *liveChild) bool { return r == c })
		}
		final = fmt.Sprintf("%s %s", name, endedText(ev.StopReason, since))
		if msg := firstLine(ev.LastAssistantMessage); msg != "" {
			final += ": " + clip(msg, liveText)
		}
	case subagent.ListenerOverflow, subagent.ListenerFailed:
		final = "progress incomplete: " + subagent.TypeOf(ev)
	}
	l.redraw(final)
	return nil
}

// starting shows a row "starting <name>..." whose time ticks until the
// child's start event takes the row over, or until the start fails, when
// the row gives way to the child's end line.
func (l *live) starting(id, name string) func(subagent.StopReason) {
	c := &liveChild{id: id, since: time.Now(), status: "starting " + name + "..."}
	l.mu.Lock()
	if !l.closed {
		l.running = append(l.running, c)
		l.redraw("")
	}
	l.mu.Unlock()
	stop := every(l.tick, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			l.redraw("")
		}
	})
	return func(reason subagent.StopReason) {
		stop()
		if reason == "" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.running = slices.DeleteFunc(l.running, func(r *liveChild) bool { return r == c })
		if !l.closed {
			l.redraw(fmt.Sprintf("child %s %s", short(id), endedText(reason, c.since)))
		}
	}
}

// update shows ev on c's row; false when the row stays as it is.
func (c *liveChild) update(ev subagent.RunProgress) bool {
	c.step = ev.Step
	switch ev.Kind {
	case subagent.TextDelta:
		c.text = lastLine(c.text + ev.Text)
	case subagent.ModelCallStarted:
		c.status, c.text = "model", ""
	case subagent.ModelCallFinished:
		// The row keeps what it shows until the next step.
		return false
	case subagent.ToolCallFinished:
		if !ev.IsError {
			return false
		}
		c.status = "failed " + firstLine(ev.Text)
	default:
		if line := stepText(ev); line != "" {
			c.status, c.text = strings.TrimPrefix(line, fmt.Sprintf("step %d ", ev.Step)), ""
		}
	}
	return true
}

// top shows the top agent's steps on a row of its own, above its
// children's, from its first step on.
func (l *live) top(ev subagent.RunProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.topRow == nil {
		l.topRow = &liveChild{since: time.Now()}
	}
	if l.topRow.update(ev) {
		l.redraw("")
	}
}

func (l *live) child(id string) *liveChild {
	for _, c := range l.running {
		if c.id == id {
			return c
		}
	}
	return nil
}

// redraw keeps final (when not empty) to be printed and redraws, at once
// when the last redraw is a frame ago, else when the frame is over.
func (l *live) redraw(final string) {
	if final != "" {
		l.finals = append(l.finals, final)
	}
	wait := l.every - time.Since(l.last)
	if wait <= 0 {
		l.draw()
		return
	}
	l.dirty = true
	if l.due == nil {
		l.due = time.AfterFunc(wait, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.due = nil
			if !l.closed && l.dirty {
				l.redraw("")
			}
		})
	}
}

// draw erases the status block, prints the end lines kept where it was,
// and draws the block again below them, in one write.
func (l *live) draw() {
	var b bytes.Buffer
	if l.drawn > 0 {
		fmt.Fprintf(&b, "\r\x1b[%dA", l.drawn)
	}
	b.WriteString(eraseBelow)
	for _, final := range l.finals {
		b.WriteString(final + "\n")
	}
	l.finals, l.dirty = nil, false
	b.WriteString(noWrap)
	l.drawn = 0
	now := time.Now()
	if l.topRow != nil {
		b.WriteString(l.topRow.row(topName, now))
		l.drawn++
	}
	for i, c := range l.running {
		if i == liveRows {
			fmt.Fprintf(&b, "… and %d more running\n", len(l.running)-liveRows)
			l.drawn++
			break
		}
		b.WriteString(c.row(c.rowName(), now))
		l.drawn++
	}
	b.WriteString(wrap)
	l.last = now
	// A failed write (a closed terminal) has nowhere to be reported.
	_, _ = l.w.Write(b.Bytes())
}

// rowName is how c's rows and end line name it.
func (c *liveChild) rowName() string { return cmp.Or(c.name, childName(c.id, "")) }

// row is c's status row, named name, as of now.
func (c *liveChild) row(name string, now time.Time) string {
	row := fmt.Sprintf("%s %s", name, humanDuration(now.Sub(c.since)))
	if c.step > 0 {
		row += fmt.Sprintf(" step %d", c.step)
	}
	row += " " + c.status
	if c.text != "" {
		row += ": " + c.text
	}
	return clip(row, liveText+40) + "\n"
}

// close erases what is left of the status block (children whose end never
// came, after an overflow), prints the end lines not yet printed and stops
// the view.
func (l *live) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.due != nil {
		l.due.Stop()
	}
	if l.drawn > 0 {
		fmt.Fprintf(l.w, "\r\x1b[%dA%s", l.drawn, eraseBelow)
		l.drawn = 0
	}
	for _, final := range l.finals {
		fmt.Fprintln(l.w, final)
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// lastLine is the last line of s, its last liveText runes at most, so that
// a streaming row shows the newest text.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	for utf8.RuneCountInString(s) > liveText {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

// clip cuts s to n runes, marking the cut, cleaned to one row: escape
// sequences go (clean) and newlines and tabs become spaces, so that a
// model's text cannot move the cursor.
func clip(s string, n int) string {
	s = rowSpaces.Replace(clean(s))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

var rowSpaces = strings.NewReplacer("\n", " ", "\t", " ")

// isTerminal says whether w is a terminal the live view can redraw (a
// character device such as /dev/null is not) whose TERM is not "dumb".
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && os.Getenv("TERM") != "dumb" && term.IsTerminal(int(f.Fd()))
}
