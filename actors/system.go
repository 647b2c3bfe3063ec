package actors

import (
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// System is one actor runtime. Create it with NewSystem, or with Wrap over a
// protoactor system the embedder already runs, and Shutdown it when every
// Service and Run on it has been closed and disposed.
type System struct {
	sys  *actor.ActorSystem
	owns bool // NewSystem made sys, so Shutdown stops it
	stop sync.Once
}

// Option configures a System NewSystem makes.
type Option func(*options)

type options struct{ log *slog.Logger }

// WithLogger routes the runtime's logs, and protoactor's, to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// NewSystem starts an actor runtime that this System owns: Shutdown stops
// it. Without WithLogger it logs warnings and errors through slog's default
// logger.
func NewSystem(opts ...Option) *System {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	log := o.log
	if log == nil {
		log = slog.New(warnOnly{slog.Default().Handler()})
	}
	return &System{owns: true, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))}
}

// Wrap runs subactor on sys, a protoactor system the embedder already runs
// and goes on owning: the System's Shutdown leaves sys running, and
// stopping sys is the embedder's job, after every Service and Run on the
// System has been closed and disposed. sys must not be nil. The runtime
// logs through sys.Logger(), the logger the embedder gave protoactor.
func Wrap(sys *actor.ActorSystem) *System { return &System{sys: sys} }

// ActorSystem is the protoactor system the runtime runs on: where an
// embedder spawns, watches and supervises run actors (package actors/run)
// beside its own.
func (s *System) ActorSystem() *actor.ActorSystem { return s.sys }

// Shutdown stops the runtime if NewSystem made it; a System from Wrap
// leaves the embedder's protoactor system running. It is idempotent:
// protoactor's own Shutdown panics when called twice.
func (s *System) Shutdown() {
	if s.owns {
		s.stop.Do(s.sys.Shutdown)
	}
}
