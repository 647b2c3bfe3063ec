package bench

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/internal/testkit/clustertest"

	"github.com/subactor/subactor/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(clustertest.Leftovers, testkit.DeadLetters)...)
}

func BenchmarkRawProtoactor(b *testing.B)             { Op(RawProtoactor).Bench(b) }
func BenchmarkLeanFloor(b *testing.B)                 { Op(LeanFloor).Bench(b) }
func BenchmarkSubactorSpawn(b *testing.B)             { Op(SubactorSpawn).Bench(b) }
func BenchmarkAgentAlone(b *testing.B)                { Op(AgentAlone).Bench(b) }
func BenchmarkRunAlone(b *testing.B)                  { Op(RunAlone).Bench(b) }
func BenchmarkSubactorSpawnBolt(b *testing.B)         { Op(SubactorSpawnBolt).Bench(b) }
func BenchmarkSubactorParentRun(b *testing.B)         { Op(SubactorParentRun).Bench(b) }
func BenchmarkSubactorParentRunListened(b *testing.B) { Op(SubactorParentRunListened).Bench(b) }
func BenchmarkSubactorParentRunTraced(b *testing.B)   { Op(SubactorParentRunTraced).Bench(b) }
func BenchmarkSubactorParentRunBolt(b *testing.B)     { Op(SubactorParentRunBolt).Bench(b) }
func BenchmarkEinoCompiled(b *testing.B)              { Op(EinoCompiled).Bench(b) }
func BenchmarkEinoCompiledCallbacks(b *testing.B)     { Op(EinoCompiledCallbacks).Bench(b) }
func BenchmarkEinoAgentTool(b *testing.B)             { Op(EinoAgentTool).Bench(b) }

// Every per-operation benchmark works a few times over and leaves nothing
// behind (TestMain checks goroutines).
func TestOpsWork(t *testing.T) {
	for name, op := range map[string]Op{
		"RawProtoactor": RawProtoactor, "LeanFloor": LeanFloor, "SubactorSpawn": SubactorSpawn,
		"AgentAlone": AgentAlone, "RunAlone": RunAlone,
		"SubactorSpawnBolt": SubactorSpawnBolt, "SubactorParentRun": SubactorParentRun,
		"SubactorParentRunListened": SubactorParentRunListened, "SubactorParentRunBolt": SubactorParentRunBolt,
		"EinoCompiled": EinoCompiled, "EinoCompiledCallbacks": EinoCompiledCallbacks, "EinoAgentTool": EinoAgentTool,
	} {
		c, err := Measure(context.Background(), op, 20)
		if err != nil || c.Ops != 20 || !(c.CPUNs > 0) || !(c.Allocs > 0) {
			t.Errorf("%s: %+v, %v", name, c, err)
		}
	}
	for name, f := range map[string]func() (Cost, error){
		"ColdStart": func() (Cost, error) { return ColdStart(context.Background(), 3) },
		"NewSystem": func() (Cost, error) { return NewSystem(3) },
	} {
		if c, err := f(); err != nil || !(c.Bytes > 0) {
			t.Errorf("%s: %+v, %v", name, c, err)
		}
	}
}

// The probe runs, and strace's summary is read (when strace is here).
func TestFsyncProbe(t *testing.T) {
	if err := FsyncProbe(context.Background(), t.TempDir(), 3, true); err != nil {
		t.Fatal(err)
	}
	n, err := syncsIn(` % time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.010000          50       200           fdatasync
  0.00    0.000000           0         4         1 fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.010000          49       204         1 total
`)
	if err != nil || n != (Syncs{All: 204, Fsync: 4}) {
		t.Fatalf("syncsIn: %+v, %v", n, err)
	}
}
