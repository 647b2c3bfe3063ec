// Package rules holds the checks the Service, the providers and the
// delegate tool share before and while a child runs: the start-time
// capabilities a provider declares (S4), the delegation depth (D6), and
// the delegating parent's lifetime (subagent.Closable) tied to the
// contexts its children start under.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package rules
