// Package cluster makes this process a node of a protoactor cluster (K1):
// membership from a static host list (static.go) or from etcd (etcd.go),
// both our own providers, under the same mutual TLS as node-to-node
// traffic (K3), an etcd outage dropping no live member (K2); and the
// node's host actor, which admits peers' starts of the providers it offers
// within its capacity and starts each as a run actor (run.Hosted) that the
// caller then commands by its PID, and no one else may.
//
// A member advertises its providers as its cluster kinds and gossips its
// state: each provider's start-time features, its capacity and its load,
// updated as its runs come and go (gossip.go; a peer's advertisement is
// validated, caps.go, K3, and the host refuses a start using a feature
// its provider lacks, S4). Callers place runs by that state, without
// asking; each answer to a start carries the load too, and a load query
// (HostStatus) is answered with the runs hosted. A continuable child is
// a grain of its provider's kind (grain.go): Home finds its home member
// by the cluster's identity lookup, which runs its activations. The host watches each caller: when the caller's
// node dies or is dropped from membership, it cancels and disposes the
// caller's runs (K2). Package actors/providers/remote is the caller's
// side.
//
// One node per process: protoactor's remote code races when several share
// one, so tests of several nodes run node processes (cmd/node's tests).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package cluster
