// Package agent is the agent loop: it asks a Model for the next message,
// runs the tools the model calls, and repeats until the model answers
// without calling a tool.
//
// Every turn is appended to a persistence.Store before the loop moves on, so
// a session can be resumed from its log (Config.Resume). Steer messages from
// a SteerSource are admitted as user turns into the next model request.
// Cancellation is the context passed to Run: the run settles with stop
// reason aborted.
//
// An *Agent implements subagent.Agent, so it can be a delegating parent or a
// published child. One Run at a time: a second concurrent Run settles at
// once with stop reason error. The other methods are safe for concurrent use.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package agent
