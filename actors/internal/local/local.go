// Package local holds the seam actors' process-local protocol: the
// commands the Service's registry actor and its sinks send a parent actor
// (package actors/parent), and the parent's answer. They are Go values,
// not protobuf messages, so no peer can forge them when nodes talk (K3);
// the protocol a run answers on the wire is package messages.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package local

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors/internal/fanout"
	"github.com/subactor/subactor/subagent"
)

// Messages to a parent actor: the Service and the sinks it hands out live
// in this process.
type (
	// Subscribe adds a listener.
	Subscribe struct{ Sub *fanout.Sub }
	// Expect announces a run whose provider is about to start with a
	// sink to this actor while someone listens: its progress is held
	// until Published, and dropped on Discarded.
	Expect struct{ RunID string }
	// Published: Start returned the run to its caller.
	Published struct {
		RunID, Provider, SessionID, Task string
		Local                            bool
	}
	// Discarded: the expected start failed.
	Discarded struct{ RunID string }
	// Progress is a run's progress from its sink.
	Progress struct{ Event subagent.RunProgress }
	// Settled: the run's result is final.
	Settled struct {
		RunID  string
		Result subagent.Result
		Err    error
	}
	// Rebind hands an idle actor over to another parent session: the
	// registry sends it instead of retiring the actor and spawning a new
	// one. Nothing is in flight to an idle actor, so it starts afresh.
	Rebind struct{ ParentID string }
	// Dropped tells the registry (the actor's parent) that a
	// subscription ended because its subscriber actor stopped, as a
	// Release would have: sent before any Idle that follows it.
	Dropped struct {
		ParentID string
		PID      *actor.PID
	}
	// Idle tells the registry (the actor's parent) that nothing is left.
	// Uses counts the references the registry handed out that reached it
	// (Published, Discarded, Subscribe).
	Idle struct {
		ParentID string
		Uses     int64
		PID      *actor.PID
	}
)
