package cluster

import (
	"context"
	"log/slog"
	"slices"
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
