package testkit

import "go.uber.org/goleak"

// DeadLetters ignores protoactor's dead-letter log throttle: a timer
// goroutine it starts when a message reaches a stopped actor (a Dispose or
// a reply racing an actor's stop does that legitimately) and that ends on
// its own a second later. Matched by function name only, never globally.
var DeadLetters = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
