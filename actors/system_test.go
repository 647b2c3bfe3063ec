package actors_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSystemRoutesProtoactorLogsToOurLogger(t *testing.T) {
	var buf bytes.Buffer
	sys := actors.NewSystem(actors.WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	defer sys.Shutdown()
	sys.ActorSystem().Logger().Warn("from protoactor")
	if !strings.Contains(buf.String(), "from protoactor") {
		t.Fatalf("protoactor's log did not reach ours: %q", buf.String())
	}
}

func TestLiveActorsCountsSpawnedActors(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	before := sys.LiveActors()
	raw := sys.ActorSystem()
	pid := raw.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if sys.LiveActors() != before+1 {
		t.Fatalf("live actors %d after a spawn, %d before", sys.LiveActors(), before)
	}
	if err := raw.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if sys.LiveActors() != before {
		t.Fatalf("live actors %d after a stop, %d before", sys.LiveActors(), before)
	}
}
