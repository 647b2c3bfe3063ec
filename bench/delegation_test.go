package bench

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/cluster/clustertest"

	"github.com/subactor/subactor/internal/leaktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(clustertest.Leftovers, leaktest.DeadLetters)...)
}

func BenchmarkRawProtoactor(b *testing.B)         { RawProtoactor(b) }
func BenchmarkRawProtoactorInline(b *testing.B)   { RawProtoactorInline(b) }
func BenchmarkSubactorSpawn(b *testing.B)         { SubactorSpawn(b) }
func BenchmarkSubactorSpawnAsync(b *testing.B)    { SubactorSpawnAsync(b) }
func BenchmarkSubactorSpawnBolt(b *testing.B)     { SubactorSpawnBolt(b) }
func BenchmarkSubactorParentRun(b *testing.B)     { SubactorParentRun(b) }
func BenchmarkSubactorParentRunBolt(b *testing.B) { SubactorParentRunBolt(b) }
func BenchmarkColdStart(b *testing.B)             { ColdStart(b) }
func BenchmarkColdStartWithSystem(b *testing.B)   { ColdStartWithSystem(b) }
func BenchmarkNewSystem(b *testing.B)             { NewSystem(b) }
