// Package actorstest holds test helpers for an actors.System.
package actorstest

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/actorsraw"
)

// Raw is the protoactor system behind sys.
func Raw(sys *actors.System) *actor.ActorSystem { return actorsraw.Of(sys) }

// LiveActors counts the actors (and pending replies) currently registered
// on sys, which lets tests check that disposal leaves nothing behind.
func LiveActors(sys *actors.System) int {
	n := 0
	for _, bucket := range actorsraw.Of(sys).ProcessRegistry.LocalPIDs.LocalPIDs {
		n += bucket.Count()
	}
	return n
}
