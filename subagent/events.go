package subagent

import "context"

// Event is a notification to a listener: one of this package's event
// types, which a listener tells apart with a type switch. TypeOf names it.
type Event interface{ eventType() string }

// TypeOf returns ev's wire name: "subagent/start", "subagent/progress",
// "subagent/end" and so on.
func TypeOf(ev Event) string { return ev.eventType() }

// ProviderAdded follows a registration.
type ProviderAdded struct{ Provider string }

// ProviderRemoved follows a release.
type ProviderRemoved struct{ Name string }

// RunStarted is emitted once Start or Resume succeeded, before any other
// event of the run.
type RunStarted struct {
	RunID     string // the run's one id: Run.ID, shared by every event of the run
	Provider  string
	SessionID string // the child's session (Run.SessionID), "" for a remote run
	Local     bool   // the provider returned a local agent
	// Task names what the child was asked, for a person to tell children
	// apart: the first line of its prompt, cut at 60 runes.
	Task string
}

// RunEnded is the last event of a run: it follows RunStarted and every
// RunProgress of the run once the run settles. An infrastructure fault ends
// with StopReason Error.
type RunEnded struct {
	RunID                string
	Provider             string
	SessionID            string
	Local                bool
	StopReason           StopReason
	LastAssistantMessage string
	Usage                *Usage // where the provider knows it
	// Result is the run's result as Wait returns it (output, structured
	// output, detail), so a listener needs no Wait of its own. Its
	// StopReason is the run's; StopReason above is Error instead when an
	// infrastructure fault ended the run. Cause does not cross the wire.
	Result Result
}

// ProgressKind says what a RunProgress reports.
type ProgressKind string

// Progress kinds (E6).
const (
	ModelCallStarted  ProgressKind = "model-call-started"
	ModelCallFinished ProgressKind = "model-call-finished" // with Usage
	ModelCallRetried  ProgressKind = "model-call-retried"  // Text: the failed attempt's error and the wait; IsError
	ToolCallStarted   ProgressKind = "tool-call-started"   // Text: the tool's name and arguments
	ToolCallFinished  ProgressKind = "tool-call-finished"  // Text: the tool's name; IsError
	SteerAdmitted     ProgressKind = "steer-admitted"      // Text: the message's first line
	MessageText       ProgressKind = "message-text"        // Text: the final answer's text
	TextDelta         ProgressKind = "text-delta"          // Text: a piece of assistant text as it streams
)

// RunProgress is what a running child is doing (E6): a run event like
// RunStarted and RunEnded, scoped to the delegating parent and ordered
// between them.
type RunProgress struct {
	RunID   string
	Kind    ProgressKind
	Step    int // 1-based model call the progress belongs to
	Text    string
	IsError bool   // a tool call that failed
	Usage   *Usage // of one model call
}

// ListenerOverflow is the last event a listener receives when it fell more
// than its bound behind (E5): it is detached rather than silently thinned,
// and resynchronises from state if it wants to go on.
type ListenerOverflow struct {
	Bound int // the events the listener was allowed to have outstanding
}

// ListenerFailed is delivered to a parent's listeners when the actor that
// sequences its events crashed while handling one: events of the runs
// named may be missing, so consumers resynchronise as after an overflow.
// Listeners stay attached.
type ListenerFailed struct {
	Reason string
}

func (ProviderAdded) eventType() string    { return "subagent/provider-added" }
func (ProviderRemoved) eventType() string  { return "subagent/provider-removed" }
func (RunStarted) eventType() string       { return "subagent/start" }
func (RunEnded) eventType() string         { return "subagent/end" }
func (RunProgress) eventType() string      { return "subagent/progress" }
func (ListenerOverflow) eventType() string { return "subagent/listener-overflow" }
func (ListenerFailed) eventType() string   { return "subagent/listener-failed" }

// Listener receives events, one at a time, on a goroutine of its own. A
// returned error or a panic is logged and changes nothing else; a slow
// listener delays only itself, and one that falls more than its bound
// behind gets ListenerOverflow and no further events.
type Listener func(Event) error

// Subscription is a listener's registration.
type Subscription interface {
	// Release stops delivery: once it returns no new call of the listener
	// begins (one in progress may finish). It never waits for the
	// listener's own code, so it may be called from inside the listener.
	// Idempotent.
	Release()
	// Flush returns once the listener has handled every event emitted to
	// it before the call, or when ctx ends or the subscription is gone.
	// It waits for the listener's code: never call it from inside the
	// listener.
	Flush(ctx context.Context) error
}

// EventSink receives a run's progress from its provider. The Service hands
// one to the provider in its Scope (Scope.Events); events emitted before Start
// returns are held until the run is published, so RunStarted precedes
// them, and those of a start that fails are dropped. Emit never blocks.
type EventSink interface {
	Emit(RunProgress)
}
