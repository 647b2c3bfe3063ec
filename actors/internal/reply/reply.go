// Package reply is how local commands are answered. A command that carries
// Go values (a provider, a listener) never crosses a node, so instead of a
// reply address registered in protoactor's process registry (package ask,
// for the wire messages a run answers) it carries the channel its answer
// goes to: cheaper, and the same mailbox order.
package reply

import (
	"context"
	"errors"
)

// ErrGone means the actor stopped before it answered.
var ErrGone = errors.New("reply: actor gone")

// To is embedded in a local command; the actor answers it once.
type To struct{ ch chan any }

// New returns a fresh answer channel.
func New() To { return To{ch: make(chan any, 1)} }

// Answer is called by the actor; it never blocks, and only the first
// answer counts.
func (r To) Answer(v any) {
	select {
	case r.ch <- v:
	default:
	}
}

// Fail answers with an error, which Wait returns as its error.
func (r To) Fail(err error) { r.Answer(failure{err}) }

type failure struct{ err error }

// Wait returns the answer, ErrGone once gone is closed without one (a
// command that reached an actor as it stopped is never answered), or ctx's
// error.
func (r To) Wait(ctx context.Context, gone <-chan struct{}) (any, error) {
	select {
	case v := <-r.ch:
		return unwrap(v)
	case <-gone:
		select {
		case v := <-r.ch:
			return unwrap(v)
		default:
			return nil, ErrGone
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func unwrap(v any) (any, error) {
	if f, ok := v.(failure); ok {
		return nil, f.err
	}
	return v, nil
}
