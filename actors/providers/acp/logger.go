package acp

import (
	"context"
	"log/slog"
)

// maxLogValue caps a string in a log record from the SDK: it logs every
// line it cannot parse whole, and an agent writing garbage must not turn
// our log into a copy of its output.
const maxLogValue = 256

// truncating is a slog handler that cuts long string values.
type truncating struct{ slog.Handler }

func (h truncating) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, truncate(r.Message, maxLogValue), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(cut(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h truncating) WithAttrs(attrs []slog.Attr) slog.Handler {
	return truncating{h.Handler.WithAttrs(attrs)}
}

func (h truncating) WithGroup(name string) slog.Handler { return truncating{h.Handler.WithGroup(name)} }

func cut(a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindString {
		if s := a.Value.String(); len(s) > maxLogValue {
			return slog.String(a.Key, truncate(s, maxLogValue)+"…")
		}
	}
	return a
}
