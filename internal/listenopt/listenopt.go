// Package listenopt holds what a subagent.ListenOption sets, for the Service
// that applies the options.
package listenopt

// Config is what ListenOptions set.
type Config struct {
	// Types, when non-empty, are the only event types delivered.
	Types []string
	// Bound, when positive, replaces the Service's bound on the events
	// this listener may have outstanding.
	Bound int
}

// Read returns what opts, a []subagent.ListenOption, set. Package subagent
// sets it as it loads: its option type is opaque outside it (so that its
// API names no internal type), and this package cannot import it.
var Read func(opts any) Config
