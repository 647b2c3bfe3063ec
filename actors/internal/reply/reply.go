// Package reply is how local commands are answered. A command that carries
// Go values (a provider, a listener) never crosses a node, so instead of a
// reply address registered in protoactor's process registry (package ask,
// for the wire messages a run answers) it carries its own answer slot:
// cheaper, and the same mailbox order.
//
// Most commands go to an actor with the inline mailbox while it is idle,
// so the actor answers on the caller's goroutine before Send returns; the
// caller then finds the answer in the slot and no channel is ever made.
// Only a caller that gets there first makes one to wait on.
package reply

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrGone means the actor stopped before it answered.
var ErrGone = errors.New("reply: actor gone")

// To is embedded in a local command, which is sent by pointer; the actor
// answers it once. The zero value is ready to use; a To must not be copied
// once sent.
type To struct {
	claimed atomic.Bool   // the first answer took the slot
	state   atomic.Uint32 // empty, waiting or answered
	v       any           // the answer, written by its claimant before answered
	ch      chan any      // made by a waiter before waiting
}

// A To's states.
const (
	empty uint32 = iota
	waiting
	answered
)

// Answer is called by the actor; it never blocks, and only the first
// answer counts.
func (r *To) Answer(v any) {
	if !r.claimed.CompareAndSwap(false, true) {
		return
	}
	r.v = v
	if !r.state.CompareAndSwap(empty, answered) {
		r.ch <- v // a waiter made ch before it said so: it has room for one
	}
}

// Fail answers with an error, which Wait returns as its error.
func (r *To) Fail(err error) { r.Answer(failure{err}) }

type failure struct{ err error }

// Wait returns the answer, ErrGone once gone is closed without one (a
// command that reached an actor as it stopped is never answered), or ctx's
// error. One goroutine waits; it may wait again after ctx ended.
func (r *To) Wait(ctx context.Context, gone <-chan struct{}) (any, error) {
	switch r.state.Load() {
	case answered:
		return unwrap(r.v)
	case empty:
		r.ch = make(chan any, 1)
		if !r.state.CompareAndSwap(empty, waiting) {
			return unwrap(r.v) // answered meanwhile, without the channel
		}
	}
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
