package actors

import (
	"context"
	"log/slog"
)

// warnOnly drops protoactor's chatty info and debug records (actor started,
// dead letters) unless the embedder passed a logger of their own.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(a)} }
func (w warnOnly) WithGroup(g string) slog.Handler      { return warnOnly{w.Handler.WithGroup(g)} }
