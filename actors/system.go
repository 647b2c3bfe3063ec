package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// System is one actor runtime. Create it with NewSystem and Shutdown it when
// every Service and Run on it has been closed and disposed.
type System struct {
	sys *actor.ActorSystem
	log *slog.Logger
}

// Option configures a System.
type Option func(*System)

// WithLogger routes the runtime's and protoactor's logs to l.
func WithLogger(l *slog.Logger) Option { return func(s *System) { s.log = l } }

// NewSystem starts an actor runtime. Without WithLogger it logs warnings and
// errors through slog's default logger.
func NewSystem(opts ...Option) *System {
	s := &System{}
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

// Logger is the System's logger.
func (s *System) Logger() *slog.Logger { return s.log }

// ActorSystem is the underlying protoactor system, for the packages of this
// module; embedders have no need for it.
func (s *System) ActorSystem() *actor.ActorSystem { return s.sys }

// LiveActors counts the actors (and pending replies) currently registered,
// which lets tests check that disposal leaves nothing behind.
func (s *System) LiveActors() int {
	n := 0
	for _, bucket := range s.sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += bucket.Count()
	}
	return n
}

// Shutdown stops the runtime.
func (s *System) Shutdown() { s.sys.Shutdown() }
