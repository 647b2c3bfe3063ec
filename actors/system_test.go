package actors_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"

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

// A Service on a wrapped system logs through the embedder's logger: a
// failing listener is logged there.
func TestWrapLogsThroughTheEmbeddersLogger(t *testing.T) {
	theirs := &signalWriter{want: "listener failed", seen: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(theirs, nil))
	raw := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	defer raw.Shutdown()
	svc := registry.New(actors.Wrap(raw))
	defer svc.Close()
	defer svc.Listen(func(subagent.Event) error { return errors.New("refused") }).Release()
	if _, err := svc.RegisterProvider(named("p")); err != nil { // publishes ProviderAdded
		t.Fatal(err)
	}
	testkit.Recv(t, theirs.seen, "the listener's failure in the embedder's log")
}

// named is a provider that is only a name.
type named string

func (n named) Name() string                      { return string(n) }
func (named) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (named) InheritsParentContext() bool         { return false }
func (named) Start(context.Context, subagent.Scope, subagent.StartRequest) (subagent.Run, error) {
	return nil, errors.ErrUnsupported
}

// signalWriter closes seen once what it was written holds want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}
