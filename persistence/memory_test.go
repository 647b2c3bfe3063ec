package persistence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/persistencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemoryConformance runs the shared suite, whose
// D4_CompactKeepsLogOnlyRecords case checks D4 (descriptors survive
// compaction) for this store.
func TestMemoryConformance(t *testing.T) {
	persistencetest.Run(t, func(*testing.T) persistence.Store { return persistence.NewMemory() })
}

func TestMemoryTaskConformance(t *testing.T) {
	persistencetest.RunTasks(t, func(*testing.T) persistence.TaskStore { return persistence.NewMemory() })
}
