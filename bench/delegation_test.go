package bench

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/leaktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.DeadLetters)
}

func BenchmarkRawProtoactor(b *testing.B)     { RawProtoactor(b) }
func BenchmarkSubactorSpawn(b *testing.B)     { SubactorSpawn(b) }
func BenchmarkSubactorParentRun(b *testing.B) { SubactorParentRun(b) }

func BenchmarkSubactorSpawnBolt(b *testing.B) { SubactorSpawnBolt(b) }
