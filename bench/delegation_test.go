package bench

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle goroutine outlives its actor system.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

func BenchmarkRawProtoactor(b *testing.B)     { RawProtoactor(b) }
func BenchmarkSubactorSpawn(b *testing.B)     { SubactorSpawn(b) }
func BenchmarkSubactorParentRun(b *testing.B) { SubactorParentRun(b) }
