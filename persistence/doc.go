// Package persistence stores session logs, a header followed by an
// ordered list of records, and the records of background tasks.
//
// A Store is the only thing the agent loop and the providers know about
// session storage; a TaskStore keeps task records apart from it. NewMemory
// makes the in-process implementation of both, OpenBolt the embedded
// on-disk default (one bbolt file; OpenBoltReadOnly reads one without
// writing), and package persistencetest holds the conformance suites
// every implementation must pass (Run and RunTasks). Package postgres is
// the store a cluster's nodes share, on PostgreSQL.
// CheckBolt verifies a bbolt file, pages and values; RepairBolt copies
// what of a damaged one reads back whole into a fresh file.
//
// The package does not know what a record means: Kind names it and Data is
// its JSON payload. Records of KindMessage are model-visible turns; other
// kinds (a provider's descriptor, for example) are log-only (every kind but KindMessage).
//
// Every record has a sequence number: the first one appended to a session
// is 1, the next 2, and so on. LoadFrom returns them with the records,
// and AppendAt appends only if the log still ends at the number its
// caller read, failing with a *ConflictError (ErrConflict) otherwise, so
// that a writer that lost a race finds out instead of interleaving.
// CreateWith creates a session together with its first records, all or
// nothing; the bbolt store's CreateDeferred does the same without a
// write of its own, the session's first write storing it (a delegated
// child's, whose creation its parent's log can give again, S9). Header,
// Sessions and Children read headers without records; both listings are
// in creation order.
//
// Compact replaces the model-visible records up to a sequence number with
// one summary record, under the last removed record's number. Log-only
// records survive it with their numbers (D4), and the log still ends
// where it did, so a writer's expected end stays valid.
//
// Errors are sentinels matched with errors.Is (ErrNotFound, ErrExists,
// ErrInvalid, ErrCorrupt, ErrClosed, ErrConflict, ErrFailed, ErrReadOnly,
// ErrTaskNotFound) and, where the caller needs details, typed errors
// matched with errors.As (*CorruptError, *ConflictError). Bad input is
// refused before anything is stored.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package persistence
