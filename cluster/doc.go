// Package cluster makes this process a node of a protoactor cluster (K1):
// membership from a static host list (static.go) or from etcd (etcd.go),
// both our own providers, under the same mutual TLS as node-to-node
// traffic (K3), an etcd outage dropping no live member (K2); and the
// node's host actor, which admits peers' starts of the providers it offers
// within its capacity and starts each as a run actor (run.Hosted) that the
// caller then commands by its PID, and no one else may.
//
// A member advertises its providers as its cluster kinds, each with a
// kind naming that provider's start-time features (caps.go: a peer's
// advertisement is validated, K3, and the host refuses a start using a
// feature its provider lacks, S4); its capacity
// and load are answered to a load query (HostStatus) and carried by each
// acceptance of a run. The host watches each caller: when the caller's
// node dies or is dropped from membership, it cancels and disposes the
// caller's runs (K2). Package actors/providers/remote is the caller's
// side.
//
// One node per process: protoactor's remote code races when several share
// one, so tests of several nodes run node processes (cmd/node's tests).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package cluster
