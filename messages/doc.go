// Package messages holds the protobuf messages the actors exchange (generated
// from subactor.proto by generate.sh; the generated code is committed) and
// the conversions between them and the contract types of package subagent.
package messages
