// Package subagent holds the stable contract of the subagent seam: the types
// that callers, the registry and every provider share.
//
// A caller asks the Service (package actors/registry) to Start a child through
// a named Provider; the Provider returns a caller-owned Run once a real child
// is ready. The Run settles exactly once to a Result and is disposed by its
// owner on every path. Optional capabilities are optional interfaces, checked
// by type assertion: a Run that is a Steerer can be steered, a Provider that
// is a Resumer can continue a child from persistence.
//
// Nothing here depends on the actor runtime, so providers import this package
// and never the registry.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package subagent
