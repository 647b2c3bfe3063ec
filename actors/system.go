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
	log  *slog.Logger
	owns bool // NewSystem made sys, so Shutdown stops it
	stop sync.Once
}

// Option configures a System.
type Option func(*System)

// WithLogger routes the runtime's logs to l, and with NewSystem
// protoactor's logs too.
func WithLogger(l *slog.Logger) Option { return func(s *System) { s.log = l } }

// NewSystem starts an actor runtime that this System owns: Shutdown stops
// it. Without WithLogger it logs warnings and errors through slog's default
// logger.
func NewSystem(opts ...Option) *System {
	s := &System{owns: true}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.New(warnOnly{slog.Default().Handler()})
	}
	log := s.log
	s.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	return s
}

// Wrap runs subactor on sys, a protoactor system the embedder already runs
// and goes on owning: the System's Shutdown leaves sys running, and
// stopping sys is the embedder's job, after every Service and Run on the
// System has been closed and disposed. sys must not be nil.
//
// Without WithLogger the runtime logs through sys.Logger(). protoactor
// fixes a system's logger when it creates the system, so WithLogger here
// reaches only subactor's own logs, not protoactor's.
func Wrap(sys *actor.ActorSystem, opts ...Option) *System {
	s := &System{sys: sys}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = sys.Logger()
	}
	return s
}

// ActorSystem is the protoactor system the runtime runs on: where an
// embedder spawns, watches and supervises run actors (package actors/run)
// beside its own.
func (s *System) ActorSystem() *actor.ActorSystem { return s.sys }

// Logger is the System's logger.
func (s *System) Logger() *slog.Logger { return s.log }

// Shutdown stops the runtime if NewSystem made it; a System from Wrap
// leaves the embedder's protoactor system running. It is idempotent:
// protoactor's own Shutdown panics when called twice.
func (s *System) Shutdown() {
	if s.owns {
		s.stop.Do(s.sys.Shutdown)
	}
}
