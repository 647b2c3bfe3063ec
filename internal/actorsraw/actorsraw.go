// Package actorsraw reaches the protoactor system behind an actors.System, for
// this module's packages only: embedders never need it, so it is no
// method of System.
package actorsraw

import "github.com/asynkron/protoactor-go/actor"

// Of returns the protoactor system behind s, an *actors.System. Package
// actors sets it as it initialises (it cannot be typed here: actors
// imports this package).
var Of func(s any) *actor.ActorSystem
