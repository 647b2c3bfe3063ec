package clustertest

import "github.com/subactor/subactor/subagent"

// Capable is Echo declaring Caps: a provider whose members advertise
// start-time features.
type Capable struct {
	Echo
	Caps subagent.Capabilities
}

func (c Capable) Capabilities() subagent.Capabilities { return c.Caps }
