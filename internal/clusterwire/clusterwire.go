// Package clusterwire is what the two sides of a remote run share beyond
// the protobuf messages: package cluster's host actor (the hosting side)
// and package actors/providers/remote (the caller's side). It holds the
// host actor's name, the codes of its refusals, and the filter of
// protoactor's membership noise that node processes log through.
package clusterwire

import (
	"context"
	"log/slog"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/subactor/subactor/subagent"
)

// HostedBy is the progress kind of a remote run placed on a member, the
// first of its run: Text is the hosting member's id.
const HostedBy subagent.ProgressKind = "remote-hosted-by"

// HostName is the name of every node's host actor: the one peers ask for
// status and for starts.
const HostName = "subactor-host"

// Host is the PID of the host actor of the node whose actors listen at
// address.
func Host(address string) *actor.PID { return actor.NewPID(address, HostName) }

// Refusal codes of messages.RemoteRefused and RemoteStartFailed.
const (
	RefusedFull       = "full"
	RefusedNoProvider = "no-provider"
	RefusedInvalid    = "invalid"
	RefusedDuplicate  = "duplicate-run"
	RefusedForeignRun = "foreign-run"
	// RefusedNotMember: the caller is not (yet) a member in the host's
	// view, so its answers could go to an earlier member's connection
	// to the same address; the caller tries again.
	RefusedNotMember  = "not-a-member"
	FailedUnsupported = "unsupported"
	FailedCancelled   = "cancelled"
	// FailedNoSession: a resume found no log of the child on the host
	// (its store is not the one the child was written to).
	FailedNoSession    = "no-session"
	RefusedUnknownKind = "unknown-message"
)

// QuietLogger returns l without protoactor's membership noise: the static
// list's provider logs an error for every member it cannot reach, every
// second, and the node reports members leaving and joining itself, once.
func QuietLogger(l *slog.Logger) *slog.Logger { return slog.New(quiet{l.Handler()}) }

var noise = []string{
	"Bad connection to the node health status",
	"Failure reaching nodes",
	"Automanaged server stopping..!",
	"EndpointWriter failed to connect",
	"EndpointWriter failed to create receive stream",
	"EndpointWriter lost connection",
}

type quiet struct{ slog.Handler }

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	if slices.Contains(noise, r.Message) {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quiet) WithAttrs(a []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(a)} }
func (q quiet) WithGroup(g string) slog.Handler      { return quiet{q.Handler.WithGroup(g)} }
