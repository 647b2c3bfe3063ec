package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"runtime"
	"strings"
)

// logLevel is the -log-level of the command being run: one command a
// process, so one level (parseFlags sets it, warn by default).
var logLevel = new(slog.LevelVar)

// logLevelFlag defines -log-level on fs, resetting logLevel to its
// default, warn.
func logLevelFlag(fs *flag.FlagSet) {
	var warn slog.LevelVar
	warn.Set(slog.LevelWarn)
	fs.TextVar(logLevel, "log-level", &warn, "the least `LEVEL` of the node's logs on stderr: debug, info, warn or error; protoactor's own are shown from one level higher (error by default), its warnings being routine (a gossip timeout as a member leaves)")
}

// logger logs to logs as slog text from logLevel on, protoactor's records
// from one level higher (see libLevel).
func logger(logs io.Writer) *slog.Logger {
	return slog.New(levels{slog.NewTextHandler(logs, &slog.HandlerOptions{Level: logLevel})})
}

// levels drops protoactor's records below libLevel; the text handler
// drops everything below logLevel.
type levels struct{ slog.Handler }

func (h levels) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < libLevel() && fromProtoactor(r.PC) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h levels) WithAttrs(a []slog.Attr) slog.Handler { return levels{h.Handler.WithAttrs(a)} }
func (h levels) WithGroup(g string) slog.Handler      { return levels{h.Handler.WithGroup(g)} }

// libLevel is the least level of protoactor's records shown: one level
// above logLevel, error at most (so warn gives error, debug gives info).
func libLevel() slog.Level {
	l := logLevel.Level()
	return max(l, min(l+4, slog.LevelError))
}

// fromProtoactor says whether the log call at pc is protoactor's.
func fromProtoactor(pc uintptr) bool {
	if pc == 0 {
		return false
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return strings.HasPrefix(f.Function, "github.com/asynkron/protoactor-go/")
}
