// Package descriptor is a durable child's descriptor (D1-D4): the
// versioned subagent/descriptor record a provider writes first in the
// child's session log, with what resuming the child needs. Snapshot
// validates and copies one (D2), Descriptor.Record encodes it, Fold and
// Parse read one back strictly (D3). The record is log-only for the
// stores (every kind but persistence.KindMessage), so Compact keeps it (D4).
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// Kind is the record kind of a durable child's descriptor. It is
// log-only (not persistence.KindMessage), so the model never
// sees it and Compact keeps it (D4).
const Kind = "subagent/descriptor"

// Version is the descriptor version this package writes and the only
// one Fold reads.
const Version = 1

// Descriptor is what a durable child needs to be resumed (D1). Its fields
// are explicit, never an open options bag, so that an unrelated option
// added later cannot change how a stored child continues. It leaves out
// the delegation depth (the session header's is authoritative, D5) and
// the output schema (the contract of one activation, not of the child).
//
// A Descriptor from Snapshot or Fold shares no memory with anything else
// and is in canonical form: Descriptor.Record encodes it and Fold reads
// the record back to an equal value.
type Descriptor struct {
	// Version is the package's Version; Snapshot sets it.
	Version int `json:"version"`
	// Provider names the provider that runs the child; required.
	Provider string `json:"provider"`
	// AgentProvider is the child's resolved model provider.
	AgentProvider string `json:"agentProvider,omitempty"`
	// AgentModel is the child's resolved model.
	AgentModel string `json:"agentModel,omitempty"`
	// Persona, when set, is the child's persona; it may not be blank.
	Persona *string `json:"persona,omitempty"`
	// ToolFilter, when set, names at least one tool, none twice and none
	// empty, across Allow and Deny together (the rule Start applies, S4).
	ToolFilter *subagent.ToolFilter `json:"toolFilter,omitempty"`
	// ProviderData is provider-specific, versioned data (the ACP provider
	// keeps its remote session id there): a JSON object with a positive
	// integer "version". This package checks only that shape; the
	// provider validates the rest. It is kept compacted.
	ProviderData json.RawMessage `json:"providerData,omitempty"`
}

// Descriptor errors. A malformed descriptor wraps ErrMalformed; an
// unsupported version wraps subagent.ErrNotResumable.
var (
	// ErrMissing means a log holds no Kind record.
	ErrMissing = errors.New("persistence: no descriptor in the log")
	// ErrMalformed means a descriptor of the current version is not
	// one this package would write.
	ErrMalformed = errors.New("persistence: malformed descriptor")
)

// descriptorError reports a malformed current-version descriptor: why,
// and the underlying error when there is one (a JSON error, or one of
// one of the ErrFilter… faults). It wraps ErrMalformed.
type descriptorError struct {
	Reason string
	Err    error
}

// Error says what is wrong with the descriptor.
func (e *descriptorError) Error() string {
	if e.Err == nil {
		return "persistence: malformed descriptor: " + e.Reason
	}
	return fmt.Sprintf("persistence: malformed descriptor: %s: %v", e.Reason, e.Err)
}

// Unwrap returns ErrMalformed and the cause, if any.
func (e *descriptorError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformed}
	}
	return []error{ErrMalformed, e.Err}
}

// unsupportedVersionError reports a descriptor of a version other than
// Version (a missing version counts as 0). The child it
// describes cannot be resumed by this build, so it wraps
// subagent.ErrNotResumable (D3).
type unsupportedVersionError struct {
	Version int
}

// Error names the version.
func (e *unsupportedVersionError) Error() string {
	return fmt.Sprintf("persistence: descriptor version %d is not supported (want %d)", e.Version, Version)
}

// Unwrap returns subagent.ErrNotResumable.
func (e *unsupportedVersionError) Unwrap() error { return subagent.ErrNotResumable }

// Snapshot validates d and returns a deep copy of it in
// canonical form, with Version set (D2). Providers call it before any
// task or session exists, so that a bad configuration fails early and
// later changes to the caller's persona, filter or provider data cannot
// reach the stored child. d.Version must be 0 (unset) or
// Version. The errors are Fold's.
func Snapshot(d Descriptor) (Descriptor, error) {
	if d.Version != 0 && d.Version != Version {
		return Descriptor{}, &unsupportedVersionError{Version: d.Version}
	}
	out := Descriptor{
		Version:       Version,
		Provider:      d.Provider,
		AgentProvider: d.AgentProvider,
		AgentModel:    d.AgentModel,
	}
	switch {
	case d.Provider == "":
		return Descriptor{}, malformed("empty provider", nil)
	case !utf8.ValidString(d.Provider):
		return Descriptor{}, malformed("provider is not UTF-8", nil)
	// Invalid UTF-8 would come back from JSON changed, so the child
	// resumed with another model name than it was started with.
	case !utf8.ValidString(d.AgentProvider):
		return Descriptor{}, malformed("agentProvider is not UTF-8", nil)
	case !utf8.ValidString(d.AgentModel):
		return Descriptor{}, malformed("agentModel is not UTF-8", nil)
	}
	if d.Persona != nil {
		p := *d.Persona
		switch {
		case strings.TrimSpace(p) == "":
			return Descriptor{}, malformed("blank persona", nil)
		case !utf8.ValidString(p):
			return Descriptor{}, malformed("persona is not UTF-8", nil)
		}
		out.Persona = &p
	}
	if d.ToolFilter != nil {
		f, err := snapshotFilter(d.ToolFilter)
		if err != nil {
			return Descriptor{}, err
		}
		out.ToolFilter = f
	}
	if len(d.ProviderData) > 0 {
		pd, err := canonicalProviderData(d.ProviderData)
		if err != nil {
			return Descriptor{}, err
		}
		out.ProviderData = pd
	}
	return out, nil
}

// snapshotFilter copies f after checking it the way Start does (S4), so
// that a filter Start accepted can always be resumed and one it would
// refuse never is.
func snapshotFilter(f *subagent.ToolFilter) (*subagent.ToolFilter, error) {
	if err := CheckFilter(f); err != nil {
		return nil, malformed(err.Error(), err)
	}
	// Empty lists become nil (appending nothing to nil is nil): that is
	// what omitempty writes and JSON reads back, so the snapshot equals
	// its own fold.
	return &subagent.ToolFilter{Allow: append([]string(nil), f.Allow...), Deny: append([]string(nil), f.Deny...)}, nil
}

// The distinct ways a tool filter is invalid, matched with errors.Is on
// Start's InvalidRequestError (its Fault) and on a malformed descriptor.
var (
	ErrFilterEmpty     = errors.New("tool filter allows and denies nothing")
	ErrFilterBlankName = errors.New("tool filter names an empty tool")
	ErrFilterDuplicate = errors.New("tool filter names a tool twice")
)

// CheckFilter says why f is invalid, or nil: one rule for Start (S4) and
// for the descriptor that resumes its run.
func CheckFilter(f *subagent.ToolFilter) error {
	if len(f.Allow) == 0 && len(f.Deny) == 0 {
		return &filterFault{"must allow or deny at least one tool", ErrFilterEmpty}
	}
	seen := make(map[string]bool, len(f.Allow)+len(f.Deny))
	for _, n := range slices.Concat(f.Allow, f.Deny) {
		switch {
		case n == "":
			return &filterFault{"tool names must not be empty", ErrFilterBlankName}
		case !utf8.ValidString(n):
			return &filterFault{"tool name is not UTF-8", nil}
		case seen[n]:
			return &filterFault{fmt.Sprintf("duplicate tool name %q", n), ErrFilterDuplicate}
		}
		seen[n] = true
	}
	return nil
}

// filterFault is CheckFilter's answer: the reason, and which fault it is.
type filterFault struct {
	reason string
	fault  error
}

func (e *filterFault) Error() string { return e.reason }
func (e *filterFault) Unwrap() error { return e.fault }

// canonicalProviderData checks that raw is a JSON object with a positive
// integer "version" and returns a compacted copy of it.
func canonicalProviderData(raw json.RawMessage) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, malformed("providerData is not UTF-8", nil)
	}
	var n int
	if found, err := jsonv2.Member(raw, "version", &n); err != nil {
		return nil, malformed("providerData: "+err.Error(), err)
	} else if !found {
		return nil, malformed(`providerData has no "version"`, nil)
	}
	if n <= 0 {
		return nil, malformed(fmt.Sprintf(`providerData "version" %d is not positive`, n), nil)
	}
	compact, err := jsonv2.AppendCompact(nil, raw)
	if err != nil {
		return nil, malformed("providerData is not JSON", err)
	}
	return compact, nil
}

// Record returns d as a Kind record whose data is d's canonical
// JSON. It validates d as Snapshot does and fails the same way.
func (d Descriptor) Record() (persistence.Record, error) {
	s, err := Snapshot(d)
	if err != nil {
		return persistence.Record{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// A persona is prose: keep its <, > and & readable in the log.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return persistence.Record{}, malformed("does not encode", err)
	}
	return persistence.Record{Kind: Kind, Data: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}, nil
}

// Fold returns the descriptor of a loaded log (D3). The first
// Kind record is authoritative; later ones are ignored
// entirely, even malformed ones, because a child's configuration is
// fixed when it is created and nothing appended afterwards may change
// it. Records of other kinds are skipped.
//
// It fails with ErrMissing when there is no descriptor record, an
// error wrapping subagent.ErrNotResumable when the record's
// version is not Version, and an error wrapping
// ErrMalformed when a current-version payload is not exactly
// what Record writes: not a JSON object, trailing data, an unknown or
// repeated key, a wrong type, null, or a value Snapshot
// refuses. The result shares no memory with recs.
func Fold(recs []persistence.Record) (Descriptor, error) {
	for _, r := range recs {
		if r.Kind == Kind {
			return Parse(r.Data)
		}
	}
	return Descriptor{}, ErrMissing
}

// Parse validates one descriptor payload, as a caller hands it in
// a subagent.Continuation, with Fold's rules (D3): it decodes it strictly
// (jsonv2: no unknown, repeated or differently cased key, no null,
// nothing after the object). It reads the version before anything else,
// so that a later version's keys are reported as an unsupported version
// rather than as unknown keys.
func Parse(data json.RawMessage) (Descriptor, error) {
	var d Descriptor
	if _, err := jsonv2.Member(data, "version", &d.Version); err != nil {
		return Descriptor{}, malformed(err.Error(), err)
	}
	if d.Version != Version {
		return Descriptor{}, &unsupportedVersionError{Version: d.Version}
	}
	if err := jsonv2.Unmarshal(data, &d); err != nil {
		return Descriptor{}, malformed(err.Error(), err)
	}
	return Snapshot(d)
}

func malformed(reason string, err error) error {
	return &descriptorError{Reason: reason, Err: err}
}
