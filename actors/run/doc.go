// Package run is the run actor: one actor per child activation.
//
// A provider calls Start with the child's work as a Body. The actor runs the
// body on a goroutine it owns and feeds every message (steer, take snapshot,
// cancel, dispose, child exited, crash) to the pure Lifecycle, then carries
// out the effects it returns. So "admitted" means the child took the steer
// into its next model request, the result settles once, and Dispose answers
// only after the child's goroutine has returned and the actor has stopped.
//
// The returned *Handle implements subagent.Run and subagent.Steerer.
package run
