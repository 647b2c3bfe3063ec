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

// TestD4_OnlyMessagesAreModelVisible pins the rule Compact keeps records
// by: every kind but KindMessage, including kinds added later, is
// log-only.
func TestD4_OnlyMessagesAreModelVisible(t *testing.T) {
	if persistence.IsLogOnly(persistence.KindMessage) {
		t.Error("IsLogOnly(KindMessage) = true")
	}
	for _, kind := range []string{"subagent/descriptor", "descriptor", "custom/future-kind"} {
		if !persistence.IsLogOnly(kind) {
			t.Errorf("IsLogOnly(%q) = false", kind)
		}
	}
}
