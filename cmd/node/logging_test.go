package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/internal/testkit"
)

// -log-level sets the node's level; protoactor's records, routed through
// the same logger, are shown from one level higher, so that its routine
// warnings (a gossip timeout as a client leaves) stay out by default.
func TestLogLevel_ProtoactorsRecordsOneLevelStricter(t *testing.T) {
	t.Cleanup(func() { logLevel.Set(slog.LevelWarn) })
	logs := func(args ...string) string {
		t.Helper()
		fs := versionFlags()
		if code, ok := parseFlags(fs, args, io.Discard, io.Discard); !ok {
			t.Fatalf("%q: exit %d", args, code)
		}
		var b testkit.Buffer
		l := logger(&b)
		actors.NewSystem(actors.WithLogger(l)).Shutdown() // protoactor logs "actor system started" at info
		l.Debug("node: debug")
		l.Info("node: info")
		l.Warn("node: warn")
		return b.String()
	}
	for _, c := range []struct {
		args       []string
		want, hide []string
	}{
		{nil, []string{"node: warn"}, []string{"node: info", "actor system started"}},
		{[]string{"-log-level", "info"}, []string{"node: info", "node: warn"}, []string{"node: debug", "actor system started"}},
		{[]string{"-log-level", "debug"}, []string{"level=DEBUG msg=\"node: debug\"", "node: info", "actor system started"}, nil},
		{[]string{"-log-level", "error"}, nil, []string{"node: warn", "actor system started"}},
	} {
		got := logs(c.args...)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: no %q in the logs:\n%s", c.args, w, got)
			}
		}
		for _, h := range c.hide {
			if strings.Contains(got, h) {
				t.Errorf("%q: %q in the logs:\n%s", c.args, h, got)
			}
		}
	}
	var stderr strings.Builder
	if code, ok := parseFlags(versionFlags(), []string{"-log-level", "loud"}, io.Discard, &stderr); ok || code != exitUsage {
		t.Errorf("-log-level loud: exit %d, stderr %q; want a usage error", code, stderr.String())
	}
}
