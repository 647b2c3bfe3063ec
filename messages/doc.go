// Package messages holds the protobuf messages the actors exchange (generated
// from subactor.proto by generate.sh; the generated code is committed).
// internal/wire converts them to and from the contract types of package
// subagent.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package messages
