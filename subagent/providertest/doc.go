// Package providertest is the conformance suite every subagent.Provider
// runs, as persistencetest is for stores: Run starts runs through the
// provider under test and checks the Run contract each must keep (R1–R4,
// S5, R6): a started run has an id, settles once to a valid stop reason,
// is disposed idempotently and concurrently, settles aborted when its
// start context ends, answers Wait with an ended context by that
// context's error, answers a steer with a typed error when it cannot
// admit it, and a start whose context had already ended leaves no
// goroutine behind.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package providertest
