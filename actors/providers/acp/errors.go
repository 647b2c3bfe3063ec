package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors of this package, matched with errors.Is. The errors below wrap
// them.
var (
	// ErrConfig is a configuration New or ParseConfigFile refuses.
	ErrConfig = errors.New("acp: invalid config")
	// ErrDir is a working directory a child cannot run in.
	ErrDir = errors.New("acp: unusable working directory")
	// ErrStart is an agent that did not get as far as a session; the
	// error names the step, the cause, and how the agent ended and what
	// it wrote on stderr when it did.
	ErrStart = errors.New("acp: agent did not start")
	// ErrCancelUnanswered is in the Cause of an aborted result when the
	// agent did not answer session/cancel within Config.CancelWait and
	// the turn was abandoned.
	ErrCancelUnanswered = errors.New("acp: agent did not answer session/cancel")
	// ErrAgentExited is in the Cause of a result whose agent process ended
	// during the turn.
	ErrAgentExited = errors.New("acp: agent process ended")
	// ErrAgentNotReading is in the Cause of a result whose agent stopped
	// reading its input: a write to it waited Config.WriteTimeout.
	ErrAgentNotReading = errors.New("acp: agent stopped reading its input")
)

// dirError reports a working directory that is not absolute, does not
// exist, is no directory or cannot be entered. Start and Resume return it
// before any process starts.
type dirError struct {
	Dir    string
	Reason string
	Err    error // the underlying error, when there is one
}

func (e *dirError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("acp: working directory %q %s: %v", e.Dir, e.Reason, e.Err)
	}
	return fmt.Sprintf("acp: working directory %q %s", e.Dir, e.Reason)
}

// Unwrap returns ErrDir and the cause, if any.
func (e *dirError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrDir}
	}
	return []error{ErrDir, e.Err}
}

// startError reports an agent that failed before its session existed:
// it could not be launched, exited, answered an error or an unsupported
// protocol version, or did not answer in time. Everything the start
// created is gone when Start returns it.
type startError struct {
	// Step is where it failed: "launch", "initialize", "session/new",
	// "session/load" or "store".
	Step string
	Err  error
	// Exit says how the process ended, when it ended ("exit status 2").
	Exit string
	// Stderr is the end of what the agent wrote to its standard error.
	Stderr string
}

func (e *startError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp: agent did not start: %s: %v", e.Step, e.Err)
	if e.Exit != "" {
		fmt.Fprintf(&b, " (agent %s)", e.Exit)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "; stderr: %s", e.Stderr)
	}
	return b.String()
}

// Unwrap returns ErrStart and the cause.
func (e *startError) Unwrap() []error { return []error{ErrStart, e.Err} }

// An agent that does not answer within its start limit
// (Config.StartTimeout, "start_timeout" in a config file) fails Start
// with an ErrStart error that also matches context.DeadlineExceeded and
// names the step it was waiting for; one answering initialize with
// another protocol version fails it naming both versions.
var (
	errStartTimeout    error = startLimit{}
	errProtocolVersion       = errors.New("acp: unsupported protocol version")
)

type startLimit struct{}

func (startLimit) Error() string        { return "acp: start limit reached" }
func (startLimit) Is(target error) bool { return target == context.DeadlineExceeded }
