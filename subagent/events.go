package subagent

// Event is a lifecycle notification. Type returns its wire name.
type Event interface{ Type() string }

// ProviderAdded follows a registration.
type ProviderAdded struct{ Provider string }

// ProviderRemoved follows a release.
type ProviderRemoved struct{ Name string }

// RunStarted is emitted once Start or Resume succeeded.
type RunStarted struct {
	RunID    string // minted by the Service, shared with RunEnded
	Provider string
	ID       string // Run.ID
	Local    bool   // the provider returned a local agent
}

// RunEnded follows RunStarted when the run settles.
type RunEnded struct {
	RunID                string
	Provider             string
	ID                   string
	Local                bool
	StopReason           StopReason
	LastAssistantMessage string
}

func (ProviderAdded) Type() string   { return "subagent/provider-added" }
func (ProviderRemoved) Type() string { return "subagent/provider-removed" }
func (RunStarted) Type() string      { return "subagent/start" }
func (RunEnded) Type() string        { return "subagent/end" }

// Listener receives events. A returned error or a panic is logged and changes
// nothing else; a slow listener delays only itself.
type Listener func(Event) error
