package persistence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/persistencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryConformance(t *testing.T) {
	persistencetest.Run(t, func(*testing.T) persistence.Store { return persistence.NewMemory() })
}
