package testkit

import (
	"strings"

	"github.com/subactor/subactor/actors"
)

// LiveActors counts the actors (and pending replies) currently registered
// on sys, which lets tests check that disposal leaves nothing behind. The
// guardians that supervise runs (actors/run's Strategy) are not counted:
// a system keeps one per restart policy for its life.
func LiveActors(sys *actors.System) int {
	n := 0
	for _, bucket := range sys.ActorSystem().ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if !strings.HasPrefix(id, "guardian") {
				n++
			}
		}
	}
	return n
}
