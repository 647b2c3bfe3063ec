package registry

import (
	"fmt"
	"strings"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/rules"
	"github.com/subactor/subactor/internal/schema"
	"github.com/subactor/subactor/subagent"
)

// validate checks a request against the provider before any provider code
// runs (S4): declared capabilities first, then semantic values, then depth.
// The Service has checked the parent is there.
func validate(p subagent.Provider, req subagent.StartRequest, resume bool) error {
	if err := rules.CheckCapabilities(p.Name(), p.Capabilities(), req); err != nil {
		return err
	}
	if _, ok := p.(subagent.Resumer); resume && !ok {
		return subagent.ErrNotResumable
	}
	switch {
	case resume && req.Continuation == nil:
		return invalid("continuation", "resume needs a continuation")
	case !resume && req.Continuation != nil:
		return invalid("continuation", "a continuation resumes a child: use Resume")
	case resume && req.Continuation.SessionID == "":
		return invalid("continuation", "names no session")
	case resume && len(req.Continuation.Descriptor) > 0:
		// D3: a malformed or unsupported descriptor fails before any
		// provider dispatch.
		if _, err := descriptor.Parse(req.Continuation.Descriptor); err != nil {
			return err
		}
	}
	if len(req.Prompt) == 0 && req.Continuation == nil {
		return invalid("prompt", "must not be empty")
	}
	if req.OutputSchema != nil {
		if _, err := schema.CompileObject(req.OutputSchema); err != nil {
			return invalid("outputSchema", err.Error())
		}
	}
	if req.MaxDepth != nil && *req.MaxDepth < 0 {
		return invalid("maxDepth", "must not be negative") // D6
	}
	if f := req.ToolFilter; f != nil {
		if err := validateFilter(f); err != nil {
			return err
		}
	}
	if req.Persona != nil && strings.TrimSpace(*req.Persona) == "" {
		return invalid("persona", "must not be empty")
	}
	if m, ok := rules.EffectiveMax(req.Parent, req.MaxDepth); ok {
		if err := rules.CheckDepth(subagent.DelegationDepthOf(req.Parent), m); err != nil {
			return err
		}
	}
	if mc, ok := p.(subagent.ModelChecker); ok && !resume && (req.Options.ModelProvider != "" || req.Options.Model != "") {
		return mc.CheckModel(req.Options.ModelProvider, req.Options.Model)
	}
	return nil
}

func validateFilter(f *subagent.ToolFilter) error {
	if err := descriptor.CheckFilter(f); err != nil {
		return &subagent.InvalidRequestError{Field: "toolFilter", Reason: err.Error(), Fault: err}
	}
	return nil
}

func invalid(field, reason string) error {
	return &subagent.InvalidRequestError{Field: field, Reason: reason}
}

// providerError reports a provider that broke the seam's contract, such
// as returning neither a run nor an error; it wraps
// subagent.ErrProviderFault.
type providerError struct {
	provider, reason string
}

func (e *providerError) Error() string {
	return fmt.Sprintf("subagent: provider %q: %s", e.provider, e.reason)
}
func (e *providerError) Unwrap() error { return subagent.ErrProviderFault }
