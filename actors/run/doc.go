// Package run is the run actor: one actor per child activation.
//
// A provider calls Start with the child's work as a Body and the Scope the
// Service handed it; the actor is spawned under the delegating parent's
// actor. It runs the body on a goroutine it owns, whether or not anyone
// waits for the run, and feeds every message
// (steer, take snapshot, cancel, dispose, watch, child exited, crash) to the
// pure Lifecycle, then carries out the effects it returns. So "admitted"
// means the child took the steer into its next model request, the result
// settles once (cancel wins over a late completion), a crash relaunches a
// continuable child within its restart budget or settles error, and
// Dispose answers only after every goroutine the run launched has returned
// and the actor has stopped.
//
// The returned *handle implements subagent.Run and subagent.Steerer. Other
// actors (a remote caller, a router, a task manager) watch a run through the
// wire protocol instead: Watch, Steer with a correlation id, Dispose with
// an acknowledgement.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package run
