package rules

import (
	"fmt"

	"github.com/subactor/subactor/subagent"
)

// UnsupportedError names the capability a provider does not declare; it
// wraps subagent.ErrUnsupported.
type UnsupportedError struct {
	Provider   string
	Capability string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("subagent: provider %q does not support %s", e.Provider, e.Capability)
}
func (e *UnsupportedError) Unwrap() error { return subagent.ErrUnsupported }

// CheckCapabilities refuses a request for a start-time feature its
// provider does not declare (S4): the Service's check before any provider
// code runs, and the ACP provider's for a caller that skips the Service.
// It returns an *UnsupportedError for the first feature req uses that
// caps does not declare, in the order outputSchema, depthLimit,
// toolFilter, persona; nil when it uses none.
func CheckCapabilities(provider string, caps subagent.Capabilities, req subagent.StartRequest) error {
	for _, c := range []struct {
		used, declared bool
		name           string
	}{
		{req.OutputSchema != nil, caps.OutputSchema, "outputSchema"},
		{req.MaxDepth != nil, caps.DepthLimit, "depthLimit"},
		{req.ToolFilter != nil, caps.ToolFilter, "toolFilter"},
		{req.Persona != nil, caps.Persona, "persona"},
	} {
		if c.used && !c.declared {
			return &UnsupportedError{Provider: provider, Capability: c.name}
		}
	}
	return nil
}
