// Package guard keeps a panic inside a seam actor's Receive from becoming
// protoactor's business. Its restarts either reset the actor's state or
// keep stale state, and a Resume directive drops the message that crashed
// (a Dispose, say), so instead each seam actor recovers in place, answers
// the command it was handling and tells its listeners (A2).
//
// The pattern, with no closure and no extra frame on the hot path:
//
//	func (a *someActor) Receive(c actor.Context) {
//		defer a.crashed(c)    // calls guard.Recovered(recover()) ...
//		guard.Enter("some", c.Message())
//		a.receive(c)
//	}
package guard

import "sync/atomic"

// Hook runs before every message a seam actor handles. Tests set one to
// inject real panics inside Receive; it is nil otherwise.
type Hook func(actor string, msg any)

var hook atomic.Pointer[Hook]

// SetHook installs h until the returned restore is called. For tests.
func SetHook(h Hook) (restore func()) {
	hook.Store(&h)
	return func() { hook.Store(nil) }
}

// Enter is called first in a seam actor's Receive: it runs the test hook,
// if any, inside the actor's recovery.
func Enter(kind string, msg any) {
	if h := hook.Load(); h != nil {
		(*h)(kind, msg)
	}
}

// Failer is a command that can be answered with an error, as a crashed
// actor answers the command it was handling.
type Failer interface{ Fail(err error) }
