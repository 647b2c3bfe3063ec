package subagent

import (
	"errors"
	"fmt"
)

// Service errors, matched with errors.Is.
var (
	ErrNilContext         = errors.New("subagent: nil context")
	ErrCancelled          = errors.New("subagent: cancelled")
	ErrNoProvider         = errors.New("subagent: no provider")
	ErrDuplicateProvider  = errors.New("subagent: duplicate provider")
	ErrUnsupported        = errors.New("subagent: unsupported capability")
	ErrInvalidRequest     = errors.New("subagent: invalid request")
	ErrNotDelivered       = errors.New("subagent: not delivered")
	ErrDepthExceeded      = errors.New("subagent: delegation depth exceeded")
	ErrNotResumable       = errors.New("subagent: provider cannot resume")
	ErrServiceClosed      = errors.New("subagent: service closed")
	ErrInvalidProviderArg = errors.New("subagent: invalid provider")
	ErrProviderFault      = errors.New("subagent: provider fault")
	ErrUnknownTool        = errors.New("subagent: unknown tool")
	ErrServiceCrashed     = errors.New("subagent: service actor crashed")
	ErrParentClosed       = errors.New("subagent: parent agent closed")
)

// InvalidRequestError names the field whose value is invalid.
// Where a field can be wrong in more than one way, Fault is the
// underlying error (Unwrap returns it beside ErrInvalidRequest).
type InvalidRequestError struct {
	Field  string
	Reason string
	Fault  error
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("subagent: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidRequest and the Fault, if any.
func (e *InvalidRequestError) Unwrap() []error {
	if e.Fault == nil {
		return []error{ErrInvalidRequest}
	}
	return []error{ErrInvalidRequest, e.Fault}
}

// cancelledError carries the context's cause and matches both ErrCancelled
// and the context error.
type cancelledError struct{ cause error }

func (e *cancelledError) Error() string   { return "subagent: cancelled: " + e.cause.Error() }
func (e *cancelledError) Unwrap() []error { return []error{ErrCancelled, e.cause} }

// Cancelled wraps a context error so it matches ErrCancelled too.
func Cancelled(cause error) error { return &cancelledError{cause: cause} }
