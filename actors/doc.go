// Package actors hosts the actor runtime the seam runs on. A System wraps one
// protoactor actor system; the registry, parent and run actors live in the
// subpackages, and the providers in actors/providers.
//
// Callers embedding subactor create one System (or Wrap the protoactor
// system they already run), build a registry.Service on it and register
// providers; that needs no protoactor of their own. A platform built on
// protoactor goes further: run.Spawn starts a provider's run as a child
// of any of its actors, which may Watch it, command it by message (package
// messages) and supervise it with its own SupervisorStrategy.
//
// # The actor tree
//
//	registry actor        one per Service: providers in order, parents by session id
//	  parent actor        one per parent session someone listens to: run events, listeners
//	run actor             one per activation; its start context ends with its
//	                      parent agent, its caller's context and the Service
//
// The seam's own actors run their mailboxes inline on the sending goroutine
// (package internal/inline, which says what that buys): their Receive
// never blocks and never runs user code.
//
// # What may cross the wire
//
// Only protobuf messages in package messages: a run's Steer (with a
// correlation id; answered by SteerAnswer to the sender), SteerWithdraw,
// Cancel, Dispose (answered by RunQuiesced to a sender), Watch (RunSettled,
// then RunQuiesced) and the event types. What a run's own child sends it
// (its exit, a snapshot request, publication), the registry's and parents'
// commands and the listeners' queues are Go values that only code in this
// process can produce: a peer cannot forge them, and a protobuf message
// that is not a run command changes nothing (K3).
//
// # Which goroutine runs user code
//
// Provider code (Start, Resume) runs on the caller's goroutine; a child's
// work (its agent loop, model and tools) on a goroutine its run owns; each
// listener on a goroutine of its own behind a bounded queue (E5); a
// caller's OnSettled observer on a goroutine of its own. None runs inside
// a seam actor's Receive or on a network goroutine.
//
// # What a crash does
//
// The registry and parent actors recover a panic in their Receive in
// place (package internal/guard):
//   - registry: the command being handled is answered with
//     subagent.ErrServiceCrashed; providers, parents and listeners stay;
//     its listeners get subagent.ListenerFailed.
//   - parent: its listeners get subagent.ListenerFailed (an event may be
//     missing) and stay subscribed; its runs are untouched.
//
// A run actor is supervised with protoactor's own machinery (A3): its
// crash, or its child's panic, is escalated to its parent actor, whose
// SupervisorStrategy decides. Restart relaunches the child from its last
// checkpoint (a run without one settles error), Stop settles it error with
// the crash, Resume goes on. The Service's runs sit under a guardian whose
// strategy is its subagent.RestartPolicy (registry.WithRunRestarts); a
// steer being handled is answered and a Dispose being handled is carried
// out.
//
// Either way every waiter is answered and no call blocks forever.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package actors
