package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/subactor/subactor/subagent"
)

// screen is a terminal just big enough for the live view: it draws text,
// CR, LF (as a terminal's output processing does, to the next line's start),
// cursor up (CSI n A), erase below (CSI J), and ignores the wrap mode
// switches (CSI ?7l, CSI ?7h). Anything else fails the test, so the view
// cannot start using a sequence nobody checked.
type screen struct {
	t        *testing.T
	rows     [][]rune
	row, col int
}

var csi = regexp.MustCompile(`^\x1b\[(\??)(\d*)([A-Za-z])`)

func (s *screen) Write(p []byte) (int, error) {
	in := string(p)
	for len(in) > 0 {
		if m := csi.FindStringSubmatch(in); m != nil {
			n, _ := strconv.Atoi(m[2])
			switch {
			case m[1] == "?" && m[2] == "7" && (m[3] == "l" || m[3] == "h"):
			case m[1] == "" && m[3] == "A":
				s.row = max(0, s.row-max(n, 1))
			case m[1] == "" && m[2] == "" && m[3] == "J":
				s.grow()
				s.rows[s.row] = s.rows[s.row][:min(s.col, len(s.rows[s.row]))]
				s.rows = s.rows[:s.row+1]
			default:
				s.t.Fatalf("unexpected escape sequence %q", m[0])
			}
			in = in[len(m[0]):]
			continue
		}
		r := []rune(in)[0]
		in = in[len(string(r)):]
		switch {
		case r == '\r':
			s.col = 0
		case r == '\n':
			s.row, s.col = s.row+1, 0
		case r < ' ' || r == 0x7f:
			s.t.Fatalf("control character %q reached the terminal", r)
		default:
			s.grow()
			line := s.rows[s.row]
			for len(line) <= s.col {
				line = append(line, ' ')
			}
			line[s.col] = r
			s.rows[s.row] = line
			s.col++
		}
	}
	return len(p), nil
}

func (s *screen) grow() {
	for len(s.rows) <= s.row {
		s.rows = append(s.rows, nil)
	}
}

// lines is what the screen shows, the cursor's empty row left out.
func (s *screen) lines() []string {
	var out []string
	for _, r := range s.rows {
		out = append(out, string(r))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// want checks the screen's lines against patterns, one each.
func (s *screen) want(t *testing.T, when string, patterns ...string) {
	t.Helper()
	got := s.lines()
	ok := len(got) == len(patterns)
	for i := 0; ok && i < len(got); i++ {
		ok = regexp.MustCompile("^" + patterns[i] + "$").MatchString(got[i])
	}
	if !ok {
		t.Fatalf("after %s the screen shows\n%s\nwant lines matching\n%s", when, strings.Join(got, "\n"), strings.Join(patterns, "\n"))
	}
}

// Contracts N1, E6: on a terminal the live view keeps one row per running
// child, redrawn in place, showing its step and the newest streamed text
// (control characters neutralised), and prints a final line above the rows
// for every child that ended; once all have ended and the view closes, only
// the final lines remain.
func TestN1_LiveViewRedrawsOneRowPerRunningChild(t *testing.T) {
	scr := &screen{t: t}
	scr.Write([]byte("session s\n"))
	l := newLive(scr)
	l.every = 0
	const a, b = "aaaaaaaa-1", "bbbbbbbb-2"
	ev := func(e subagent.Event) {
		t.Helper()
		if err := l.event(e); err != nil {
			t.Fatal(err)
		}
	}
	ev(subagent.RunStarted{RunID: a})
	ev(subagent.RunStarted{RunID: b})
	scr.want(t, "two starts", "session s", `child aaaaaaaa-1 \S+ started`, `child bbbbbbbb-2 \S+ started`)

	ev(subagent.RunProgress{RunID: a, Kind: subagent.ModelCallStarted, Step: 1})
	ev(subagent.RunProgress{RunID: a, Kind: subagent.TextDelta, Step: 1, Text: "first line\nsec"})
	ev(subagent.RunProgress{RunID: a, Kind: subagent.TextDelta, Step: 1, Text: "ond \x1b[2J line"})
	ev(subagent.RunProgress{RunID: b, Kind: subagent.ToolCallStarted, Step: 1, Text: `list {"path":"b"}`})
	scr.want(t, "streamed text and a tool call", "session s",
		`child aaaaaaaa-1 \S+ step 1 model: second  line`,
		`child bbbbbbbb-2 \S+ step 1 tool list \{"path":"b"\}`)

	ev(subagent.RunProgress{RunID: a, Kind: subagent.ModelCallFinished, Step: 1, Usage: &subagent.Usage{InputTokens: 1}})
	ev(subagent.RunProgress{RunID: b, Kind: subagent.ToolCallFinished, Step: 1, Text: "list", IsError: true})
	scr.want(t, "a finished call and a failed tool", "session s",
		`child aaaaaaaa-1 \S+ step 1 model: second  line`,
		`child bbbbbbbb-2 \S+ step 1 failed list`)

	ev(subagent.RunEnded{RunID: a, StopReason: subagent.Completed, LastAssistantMessage: "all done\nmore"})
	scr.want(t, "one end", "session s",
		`child aaaaaaaa-1 ended: completed in \S+: all done`,
		`child bbbbbbbb-2 \S+ step 1 failed list`)

	ev(subagent.RunProgress{RunID: b, Kind: subagent.MessageText, Step: 2, Text: "tally"})
	ev(subagent.RunEnded{RunID: b, StopReason: subagent.Error})
	l.close()
	scr.want(t, "both ends", "session s",
		`child aaaaaaaa-1 ended: completed in \S+: all done`,
		`child bbbbbbbb-2 ended: error in \S+`)
	if scr.row != 3 || scr.col != 0 {
		t.Fatalf("cursor at %d:%d, want the start of the line below the last", scr.row, scr.col)
	}
	ev(subagent.RunStarted{RunID: "late"})
	scr.want(t, "an event after close", "session s",
		`child aaaaaaaa-1 ended: completed in \S+: all done`,
		`child bbbbbbbb-2 ended: error in \S+`)
}

// Contract N1: the live view shows at most liveRows children and counts the
// rest, so that the block fits a small terminal; close erases the rows of
// children whose end never came (an overflow detached the listener).
func TestN1_LiveViewBoundsItsRows(t *testing.T) {
	scr := &screen{t: t}
	l := newLive(scr)
	l.every = 0
	for i := range liveRows + 3 {
		if err := l.event(subagent.RunStarted{RunID: fmt.Sprintf("child%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range liveRows {
		want = append(want, fmt.Sprintf(`child child%03d \S+ started`, i))
	}
	scr.want(t, "many starts", append(want, "… and 3 more running")...)
	if err := l.event(subagent.ListenerOverflow{Bound: 4}); err != nil {
		t.Fatal(err)
	}
	l.close()
	scr.want(t, "an overflow and close", "progress incomplete: subagent/listener-overflow")
}

// Contracts N1, P3: an agent server's child is shown while its agent
// starts, a live row whose time ticks, which the child's start event takes
// over; a start that fails (here cancelled) leaves the child's end line.
func TestN1_LiveViewShowsAgentsStarting(t *testing.T) {
	scr := &screen{t: t}
	l := newLive(scr)
	l.every, l.tick = 0, time.Hour
	started := l.starting("cccccccc-3", "fake")
	scr.want(t, "a start", `child cccccccc-3 \S+ starting fake\.\.\.`)
	started("")
	if err := l.event(subagent.RunStarted{RunID: "cccccccc-3"}); err != nil {
		t.Fatal(err)
	}
	scr.want(t, "the child's start event", `child cccccccc-3 \S+ started`)
	aborted := l.starting("dddddddd-4", "slow")
	scr.want(t, "a second start", `child cccccccc-3 \S+ started`, `child dddddddd-4 \S+ starting slow\.\.\.`)
	aborted(subagent.Aborted)
	scr.want(t, "a cancelled start", `child dddddddd-4 ended: aborted in \S+`, `child cccccccc-3 \S+ started`)
	l.close()
}

// Contracts N1, P3: piped, an agent's start is a plain line, and a start
// that never got a child ends with the child's end line.
func TestN1_PlainProgressShowsAgentsStarting(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b)
	p.starting("eeeeeeee-5", "fake")(subagent.Aborted)
	if !regexp.MustCompile(`^child eeeeeeee-5 starting fake\.\.\.\nchild eeeeeeee-5 ended: aborted in \S+\n$`).MatchString(b.String()) {
		t.Fatalf("lines:\n%s", b.String())
	}
}

// Contracts N1, P3, K3 (item 10 of issue 18): piped, a slow start is shown
// again every startingEvery with the time it has taken, in fake time, and
// not after it ended; the live view's row shows the time too.
func TestN1_SlowStartShowsItsElapsedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		p := newProgress(&b)
		ended := p.starting("eeeeeeee-6", "slow")
		time.Sleep(2*startingEvery + startingEvery/2)
		synctest.Wait()
		ended("")
		time.Sleep(2 * startingEvery)
		synctest.Wait()
		want := fmt.Sprintf("child eeeeeeee-6 starting slow...\nchild eeeeeeee-6 starting slow... %s\nchild eeeeeeee-6 starting slow... %s\n", startingEvery, 2*startingEvery)
		if b.String() != want {
			t.Fatalf("lines:\n%s\nwant:\n%s", b.String(), want)
		}

		scr := &screen{t: t}
		l := newLive(scr)
		l.tick = startTick
		ended = l.starting("ffffffff-7", "slow")
		time.Sleep(3*startTick + startTick/2)
		synctest.Wait()
		scr.want(t, "a start 3s in", `child ffffffff-7 3s starting slow\.\.\.`)
		ended(subagent.Aborted)
		l.close()
	})
}

// writes counts a writer's writes and keeps the last.
type writes struct {
	n    int
	last string
	all  strings.Builder
}

func (w *writes) Write(p []byte) (int, error) {
	w.n++
	w.last = string(p)
	return w.all.Write(p)
}

// Contract N1: the live view redraws at most 20 times a second (once a
// frame) however fast events come, in fake time; the newest state is drawn
// once the frame is over, and no end line is lost, also at close.
func TestN1_LiveViewFrameCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		l := newLive(&w)
		begun := time.Now()
		const id = "0199aaaa-bbbb-7ccc-8ddd-123456789abc"
		if err := l.event(subagent.RunStarted{RunID: id}); err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			if err := l.event(subagent.RunProgress{RunID: id, Kind: subagent.ToolCallStarted, Step: i + 1, Text: fmt.Sprintf("list %d", i)}); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				time.Sleep(time.Millisecond) // 1,000 events a second
			}
		}
		time.Sleep(frame)
		synctest.Wait()
		elapsed := time.Since(begun)
		if most := int(elapsed/frame) + 1; w.n > most || w.n < most/2 {
			t.Fatalf("%d redraws in %s, want at most %d (one a frame) and not far fewer", w.n, elapsed, most)
		}
		if !strings.Contains(w.last, "step 2000 tool list 1999") {
			t.Fatalf("the last frame %q does not show the newest step", w.last)
		}
		if err := l.event(subagent.RunEnded{RunID: id, StopReason: subagent.Completed}); err != nil {
			t.Fatal(err)
		}
		l.close() // within the frame: the end line is printed by close
		if !strings.Contains(w.all.String(), "child 123456789abc ended: completed in 1.") {
			t.Fatalf("no end line in %q", w.last)
		}
	})
}

// Contract N1: durations are shown to a few digits, never as 0.
func TestN1_HumanDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		412 * time.Microsecond:                "412µs",
		412*time.Millisecond + 345678:         "412ms",
		5264660 * time.Microsecond:            "5.26s",
		12345 * time.Millisecond:              "12.3s",
		2*time.Minute + 5400*time.Millisecond: "2m5s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// Contract E6: the live view shows the top agent's own steps on a row of
// its own above its children's, a retried model call included.
func TestE6_LiveViewShowsTheTopAgentsSteps(t *testing.T) {
	scr := &screen{t: t}
	l := newLive(scr)
	l.every = 0
	l.top(subagent.RunProgress{Kind: subagent.ModelCallStarted, Step: 1})
	scr.want(t, "its first model call", `top \S+ step 1 model`)
	l.top(subagent.RunProgress{Kind: subagent.ModelCallRetried, Step: 1, IsError: true, Text: "attempt 1 failed, retrying in 2s: 503"})
	scr.want(t, "a retry", `top \S+ step 1 retry attempt 1 failed, retrying in 2s: 503`)
	if err := l.event(subagent.RunStarted{RunID: "aaaaaaaa-1"}); err != nil {
		t.Fatal(err)
	}
	scr.want(t, "a child's start", `top \S+ step 1 retry attempt 1 failed, retrying in 2s: 503`, `child aaaaaaaa-1 \S+ started`)
	l.close()
	scr.want(t, "close")
}

// Contract E6: plain progress prints the top agent's steps as "top step
// ..." lines.
func TestE6_PlainProgressShowsTheTopAgentsSteps(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b)
	p.top(subagent.RunProgress{Kind: subagent.ModelCallStarted, Step: 1})
	p.top(subagent.RunProgress{Kind: subagent.ModelCallRetried, Step: 1, IsError: true, Text: "attempt 1 failed, retrying in 2s: 503"})
	p.top(subagent.RunProgress{Kind: subagent.TextDelta, Step: 1, Text: "left out"})
	if want := "top step 1 model\ntop step 1 retry attempt 1 failed, retrying in 2s: 503\n"; b.String() != want {
		t.Fatalf("progress %q, want %q", b.String(), want)
	}
}

// Ids a person can tell apart: a child's lines and rows name its task
// (the start event's, cleaned) beside its short id.
func TestN1_ProgressNamesEachChildsTask(t *testing.T) {
	started := subagent.RunStarted{RunID: "0190aaaa-bbbb-7ccc-8ddd-0123456789ab", Task: "tally src\x1b[2J"}
	step := subagent.RunProgress{RunID: started.RunID, Kind: subagent.ModelCallStarted, Step: 1}
	ended := subagent.RunEnded{RunID: started.RunID, StopReason: subagent.Completed}

	var b strings.Builder
	p := newProgress(&b)
	for _, ev := range []subagent.Event{started, step, ended} {
		if err := p.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := regexp.MustCompile(`^child 0123456789ab \[tally src\] started\nchild 0123456789ab \[tally src\] step 1 model\nchild 0123456789ab \[tally src\] ended: completed in \S+\n$`)
	if !want.MatchString(b.String()) {
		t.Errorf("plain progress %q, want it to match %s", b.String(), want)
	}

	scr := &screen{t: t}
	l := newLive(scr)
	l.every = 0
	for _, ev := range []subagent.Event{started, step} {
		if err := l.event(ev); err != nil {
			t.Fatal(err)
		}
	}
	scr.want(t, "a step", `child 0123456789ab \[tally src\] \S+ step 1 model`)
	if err := l.event(ended); err != nil {
		t.Fatal(err)
	}
	l.close()
	scr.want(t, "its end", `child 0123456789ab \[tally src\] ended: completed in \S+`)
}
