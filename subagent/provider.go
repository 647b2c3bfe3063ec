package subagent

import "context"

// Capabilities are the start-time features a provider declares. The Service
// rejects a request that uses an undeclared one before any provider code runs.
type Capabilities struct {
	OutputSchema bool `json:"outputSchema"`
	DepthLimit   bool `json:"depthLimit"`
	ToolFilter   bool `json:"toolFilter"`
	Persona      bool `json:"persona"`
}

// Provider creates children. Start owns setup until it returns: on any error
// (including ctx ending) it must already have released every partial resource.
// On success the caller owns the Run. ctx stays the run's cancellation channel
// after Start returns: when it ends, the live child is cancelled. scope is
// the run the Service asks for (its id, event sink, restart policy and
// cancel); a caller other than the Service passes the zero Scope.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	// InheritsParentContext is descriptive only: whether the child sees the
	// parent's completed turns.
	InheritsParentContext() bool
	Start(ctx context.Context, scope Scope, req StartRequest) (Run, error)
}

// ModelChecker is a Provider that can tell, before any child exists,
// whether it can serve a model provider and model named in a request's
// agent options; the Service asks it during validation (S4, M1).
type ModelChecker interface {
	CheckModel(provider, model string) error
}

// Resumer is a Provider that can continue a child from persistence. ctx
// and scope are as for Start.
type Resumer interface {
	Resume(ctx context.Context, scope Scope, req StartRequest) (Run, error)
}

// Run is one activation of a child, owned by the caller that started it.
type Run interface {
	// ID is the run id the Service minted for this activation (the
	// provider's Scope.RunID): the one id every event of
	// the run and every tool answer about it carry.
	ID() string
	// SessionID is the child's session: for a fresh local child the same
	// value as ID, for a resumed one the session it continues, "" for a
	// run with no session on this node.
	SessionID() string
	// LocalAgent is the exact published child agent, or nil for a remote run.
	LocalAgent() Agent
	// Wait blocks until the result settles or ctx ends; once ctx has
	// ended it returns ctx's error, settled or not. The result settles
	// exactly once; every call under a live ctx returns the same value.
	// Otherwise a non-nil error is an infrastructure fault the Result
	// cannot represent. A run makes progress whether or not anyone waits.
	Wait(ctx context.Context) (Result, error)
	// OnSettled calls f once with the settled result, at once if it has
	// already settled. f must not block. On a Run the Service returned, f
	// runs on a goroutine of its own.
	OnSettled(f func(Result, error))
	// Dispose cancels what remains and returns after the child's resources
	// have quiesced. It is idempotent and safe to call concurrently.
	Dispose(ctx context.Context) error
}

// Steerer is a Run whose live child accepts messages. Steer returns only after
// the child's next model request has admitted the message; a message that
// cannot be admitted fails with ErrNotDelivered and is not queued.
type Steerer interface {
	Steer(ctx context.Context, message []ContentBlock) error
}

// Agent is what the seam needs to know of an agent: its session and depth.
type Agent interface {
	ID() string
	SessionID() string
	Header() SessionHeader
	Options() AgentOptions
}

// Closable is an Agent that can be closed. The Service starts no child for
// a closed parent (ErrParentClosed), and a parent that closes while a
// provider sets up or while a child runs cancels that child.
type Closable interface {
	// Lifetime ends when the agent closes; its cause says why.
	Lifetime() context.Context
}

// SessionHeader is the durable head of a session log.
type SessionHeader struct {
	SessionID       string `json:"sessionId"`
	ParentSessionID string `json:"parentSessionId,omitempty"`
	// DelegationDepth is authoritative and monotonic (D5).
	DelegationDepth int `json:"delegationDepth"`
}
