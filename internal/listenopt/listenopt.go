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
