// Package testkit is the tests' support, in one place: how a test waits
// (every wait has a deadline and fails the test by name, so a regression
// never shows up only as a package timeout), the one goroutine leak checks
// may ignore, a buffer several goroutines may write, a heap sampler for
// the tests that bound memory (K3), and a count of the live actors on a
// System. Its subpackages run the real partners tests talk to: ACP
// agents, cluster nodes, PostgreSQL, an OpenAI-compatible server, and a
// damaged bbolt file.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package testkit
