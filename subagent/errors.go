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
)

// UnsupportedError names the capability a provider does not declare.
type UnsupportedError struct {
	Provider   string
	Capability string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("subagent: provider %q does not support %s", e.Provider, e.Capability)
}
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// InvalidRequestError names the field whose value is invalid.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("subagent: invalid %s: %s", e.Field, e.Reason)
}
func (e *InvalidRequestError) Unwrap() error { return ErrInvalidRequest }

// DepthError reports a delegation beyond the cap.
type DepthError struct{ Depth, Max int }

func (e *DepthError) Error() string {
	return fmt.Sprintf("subagent: delegation depth %d reached max depth %d", e.Depth, e.Max)
}
func (e *DepthError) Unwrap() error { return ErrDepthExceeded }

// cancelledError carries the context's cause and matches both ErrCancelled
// and the context error.
type cancelledError struct{ cause error }

func (e *cancelledError) Error() string   { return "subagent: cancelled: " + e.cause.Error() }
func (e *cancelledError) Unwrap() []error { return []error{ErrCancelled, e.cause} }

// Cancelled wraps a context error so it matches ErrCancelled too.
func Cancelled(cause error) error { return &cancelledError{cause: cause} }
