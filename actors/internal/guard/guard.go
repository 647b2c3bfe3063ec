// Package guard keeps a panic inside a seam actor's Receive from becoming
// protoactor's business. Its restarts either reset the actor's state or
// keep stale state, and a Resume directive drops the message that crashed
// (a Dispose, say), so instead each seam actor recovers in place, answers
// the command it was handling and tells its listeners (A2).
//
// The pattern, with no closure and no extra frame on the hot path:
//
//	func (a *someActor) Receive(c actor.Context) {
//		msg := c.Message()
//		defer a.crashed(c, msg) // recover(), then answer and tell
//		guard.Enter("some", msg)
//		a.receive(c, msg)
//	}
//
// Enter runs a test hook that injects real panics inside Receive; it
// exists only in builds with the subactortest tag, as the tests are run
// (hook_on.go). In the product it does nothing (hook_off.go).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package guard

// Failer is a command that can be answered with an error, as a crashed
// actor answers the command it was handling.
type Failer interface{ Fail(err error) }
