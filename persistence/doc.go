// Package persistence stores session logs: a header followed by an ordered
// list of records.
//
// A Store is the only thing the agent loop and the providers know about
// storage. Memory is the in-process implementation, Bolt the embedded
// on-disk default (one bbolt file), and package persistencetest holds the
// conformance suite every implementation must pass.
//
// The package does not know what a record means: Kind names it and Data is
// its JSON payload. Records of KindMessage are model-visible turns; other
// kinds (a provider's descriptor, for example) are log-only.
package persistence
