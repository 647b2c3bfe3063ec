package testkit

import (
	"github.com/subactor/subactor/actors"
)

// LiveActors counts the actors (and pending replies) currently registered
// on sys, which lets tests check that disposal leaves nothing behind.
func LiveActors(sys *actors.System) int {
	n := 0
	for _, bucket := range sys.ActorSystem().ProcessRegistry.LocalPIDs.LocalPIDs {
		n += bucket.Count()
	}
	return n
}
