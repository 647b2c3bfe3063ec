// Package persistencetest is the conformance suite for persistence.Store
// implementations. Every store runs the same cases:
//
//	func TestConformance(t *testing.T) {
//		persistencetest.Run(t, func(t *testing.T) persistence.Store { return newStore(t) })
//	}
//
// A store that also keeps task records passes RunTasks the same way.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package persistencetest
