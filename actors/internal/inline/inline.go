// Package inline runs an actor's mailbox on the goroutine that sends to it,
// for the seam's own actors (registry, parent, run). Their Receive never
// blocks and never calls user code that could, so running it inline costs
// the sender a few microseconds and saves a goroutine start and a stack
// growth per scheduled mailbox, the largest cost of a delegation otherwise.
// Listener actors run user code and keep protoactor's default dispatcher.
package inline

import "github.com/asynkron/protoactor-go/actor"

// throughput is how many messages one sender processes before yielding.
const throughput = 300

// Props builds props for an actor whose mailbox runs inline.
func Props(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithDispatcher(actor.NewSynchronizedDispatcher(throughput)))
}
