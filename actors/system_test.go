package actors_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/testkit"

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
	before := testkit.LiveActors(sys)
	raw := sys.ActorSystem()
	pid := raw.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if testkit.LiveActors(sys) != before+1 {
		t.Fatalf("live actors %d after a spawn, %d before", testkit.LiveActors(sys), before)
	}
	if err := raw.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if testkit.LiveActors(sys) != before {
		t.Fatalf("live actors %d after a stop, %d before", testkit.LiveActors(sys), before)
	}
}

// embedderSystem is a protoactor system as an embedder runs it, logging
// into buf.
func embedderSystem(buf *bytes.Buffer) *actor.ActorSystem {
	log := slog.New(slog.NewTextHandler(buf, nil))
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
}

func TestWrappedSystemOutlivesOurShutdown(t *testing.T) {
	var buf bytes.Buffer
	raw := embedderSystem(&buf)
	defer raw.Shutdown()
	sys := actors.Wrap(raw)
	if sys.ActorSystem() != raw {
		t.Fatal("Wrap did not use the embedder's system")
	}
	sys.Shutdown()
	sys.Shutdown()
	if raw.IsStopped() {
		t.Fatal("our Shutdown stopped the embedder's system")
	}
	// The embedder's system still runs actors.
	pid := raw.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond("pong " + s)
		}
	}))
	defer func() { _ = raw.Root.StopFuture(pid).Wait() }()
	got, err := raw.Root.RequestFuture(pid, "ping", testkit.Deadline).Result()
	if err != nil || got != "pong ping" {
		t.Fatalf("reply %v, %v", got, err)
	}
}

func TestNewSystemShutdownStopsItsOwn(t *testing.T) {
	sys := actors.NewSystem()
	sys.Shutdown()
	if !sys.ActorSystem().IsStopped() {
		t.Fatal("Shutdown left a system NewSystem made running")
	}
	sys.Shutdown() // idempotent: protoactor's own would panic here
}

func TestWrapLogsThroughTheEmbeddersLoggerUnlessGivenOne(t *testing.T) {
	var theirs, ours bytes.Buffer
	raw := embedderSystem(&theirs)
	defer raw.Shutdown()
	actors.Wrap(raw).Logger().Warn("to theirs")
	if !strings.Contains(theirs.String(), "to theirs") {
		t.Fatalf("the embedder's logger missed our log: %q", theirs.String())
	}
	actors.Wrap(raw, actors.WithLogger(slog.New(slog.NewTextHandler(&ours, nil)))).Logger().Warn("to ours")
	if !strings.Contains(ours.String(), "to ours") || strings.Contains(theirs.String(), "to ours") {
		t.Fatalf("WithLogger not honoured: ours %q, theirs %q", ours.String(), theirs.String())
	}
}
