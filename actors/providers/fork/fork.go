// Package fork is the provider of forked children (P2): in-process children
// that start with their parent's completed turns, never the turn in flight
// (the one delegating to them), so the child knows what the parent knows
// without inheriting its tools, services or authority (P5: the flag is
// descriptive only). Like spawn's, its children are durable: Resume
// continues one from its own log and never re-forks the parent's newer
// history.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package fork

import (
	"cmp"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/subagent"
)

// DefaultName is the name a fork provider registers under by default.
const DefaultName = "fork"

// New returns a fork provider: spawn's machinery with every child seeded
// from its parent. cfg.Name defaults to DefaultName; the parent must be an
// in-process agent whose completed turns can be read. Like spawn's, it is
// also a subagent.Resumer and a subagent.ModelChecker.
func New(cfg spawn.Config) (subagent.Provider, error) {
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Fork = true
	return spawn.New(cfg)
}
