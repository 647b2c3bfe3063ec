package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/subactor/subactor/subagent"
)

// DescriptorKind is the record kind of a durable child's descriptor. It
// is log-only (IsLogOnly(DescriptorKind) is true), so the model never sees
// it and Compact keeps it (D4).
const DescriptorKind = "subagent/descriptor"

// DescriptorVersion is the descriptor version this package writes and
// the only one FoldDescriptor reads.
const DescriptorVersion = 1

// Descriptor is what a durable child needs to be resumed (D1). Its fields
// are explicit, never an open options bag, so that an unrelated option
// added later cannot change how a stored child continues. It leaves out
// the delegation depth (the session header's is authoritative, D5) and
// the output schema (the contract of one activation, not of the child).
//
// A Descriptor from SnapshotDescriptor or FoldDescriptor shares no memory
// with anything else and is in canonical form: Descriptor.Record encodes
// it and FoldDescriptor reads the record back to an equal value.
type Descriptor struct {
	// Version is DescriptorVersion; SnapshotDescriptor sets it.
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

// Descriptor errors. A malformed descriptor is a *DescriptorError; an
// unsupported version wraps subagent.ErrNotResumable.
var (
	// ErrNoDescriptor means a log holds no DescriptorKind record.
	ErrNoDescriptor = errors.New("persistence: no descriptor in the log")
	// ErrMalformedDescriptor means a descriptor of the current version
	// is not one this package would write.
	ErrMalformedDescriptor = errors.New("persistence: malformed descriptor")
)

// DescriptorError reports a malformed current-version descriptor: why,
// and the underlying error when there is one (a JSON error, or one of
// subagent's ErrToolFilter… sentinels). It wraps ErrMalformedDescriptor.
type DescriptorError struct {
	Reason string
	Err    error
}

// Error says what is wrong with the descriptor.
func (e *DescriptorError) Error() string {
	if e.Err == nil {
		return "persistence: malformed descriptor: " + e.Reason
	}
	return fmt.Sprintf("persistence: malformed descriptor: %s: %v", e.Reason, e.Err)
}

// Unwrap returns ErrMalformedDescriptor and the cause, if any.
func (e *DescriptorError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformedDescriptor}
	}
	return []error{ErrMalformedDescriptor, e.Err}
}

// unsupportedVersionError reports a descriptor of a version other than
// DescriptorVersion (a missing version counts as 0). The child it
// describes cannot be resumed by this build, so it wraps
// subagent.ErrNotResumable (D3).
type unsupportedVersionError struct {
	Version int
}

// Error names the version.
func (e *unsupportedVersionError) Error() string {
	return fmt.Sprintf("persistence: descriptor version %d is not supported (want %d)", e.Version, DescriptorVersion)
}

// Unwrap returns subagent.ErrNotResumable.
func (e *unsupportedVersionError) Unwrap() error { return subagent.ErrNotResumable }

// SnapshotDescriptor validates d and returns a deep copy of it in
// canonical form, with Version set (D2). Providers call it before any
// task or session exists, so that a bad configuration fails early and
// later changes to the caller's persona, filter or provider data cannot
// reach the stored child. d.Version must be 0 (unset) or
// DescriptorVersion. The errors are FoldDescriptor's.
func SnapshotDescriptor(d Descriptor) (Descriptor, error) {
	switch d.Version {
	case 0, DescriptorVersion:
	default:
		return Descriptor{}, &unsupportedVersionError{Version: d.Version}
	}
	out := Descriptor{
		Version:       DescriptorVersion,
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
	if len(f.Allow) == 0 && len(f.Deny) == 0 {
		return nil, malformed("tool filter names no tool", subagent.ErrToolFilterEmpty)
	}
	seen := make(map[string]bool, len(f.Allow)+len(f.Deny))
	for _, names := range [][]string{f.Allow, f.Deny} {
		for _, n := range names {
			switch {
			case n == "":
				return nil, malformed("tool filter names an empty tool", subagent.ErrToolFilterBlankName)
			case !utf8.ValidString(n):
				return nil, malformed("tool filter name is not UTF-8", nil)
			case seen[n]:
				return nil, malformed(fmt.Sprintf("tool filter names %q twice", n), subagent.ErrToolFilterDuplicate)
			}
			seen[n] = true
		}
	}
	// Empty lists become nil: that is what omitempty writes and JSON
	// reads back, so the snapshot equals its own fold.
	out := &subagent.ToolFilter{}
	if len(f.Allow) > 0 {
		out.Allow = append([]string(nil), f.Allow...)
	}
	if len(f.Deny) > 0 {
		out.Deny = append([]string(nil), f.Deny...)
	}
	return out, nil
}

// canonicalProviderData checks that raw is a JSON object with a positive
// integer "version" and returns a compacted copy of it.
func canonicalProviderData(raw json.RawMessage) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, malformed("providerData is not UTF-8", nil)
	}
	fields, err := objectFields(raw, "providerData")
	if err != nil {
		return nil, err
	}
	v, ok := fields["version"]
	if !ok {
		return nil, malformed(`providerData has no "version"`, nil)
	}
	var n int
	if err := decodeValue(v, &n); err != nil {
		return nil, malformed(`providerData "version" is not an integer`, err)
	}
	if n <= 0 {
		return nil, malformed(fmt.Sprintf(`providerData "version" %d is not positive`, n), nil)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, malformed("providerData is not JSON", err)
	}
	return buf.Bytes(), nil
}

// Record returns d as a DescriptorKind record whose data is d's canonical
// JSON. It validates d as SnapshotDescriptor does and fails the same way.
func (d Descriptor) Record() (Record, error) {
	s, err := SnapshotDescriptor(d)
	if err != nil {
		return Record{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// A persona is prose: keep its <, > and & readable in the log.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return Record{}, malformed("does not encode", err)
	}
	return Record{Kind: DescriptorKind, Data: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}, nil
}

// FoldDescriptor returns the descriptor of a loaded log (D3). The first
// DescriptorKind record is authoritative; later ones are ignored
// entirely, even malformed ones, because a child's configuration is
// fixed when it is created and nothing appended afterwards may change
// it. Records of other kinds are skipped.
//
// It fails with ErrNoDescriptor when there is no descriptor record, an
// *unsupportedVersionError (subagent.ErrNotResumable) when the record's
// version is not DescriptorVersion, and a *DescriptorError
// (ErrMalformedDescriptor) when a current-version payload is not exactly
// what Record writes: not a JSON object, trailing data, an unknown or
// repeated key, a wrong type, null, or a value SnapshotDescriptor
// refuses. The result shares no memory with recs.
func FoldDescriptor(recs []Record) (Descriptor, error) {
	for _, r := range recs {
		if r.Kind == DescriptorKind {
			return parseDescriptor(r.Data)
		}
	}
	return Descriptor{}, ErrNoDescriptor
}

// ParseDescriptor validates one descriptor payload, as a caller hands it in
// a subagent.Continuation, with FoldDescriptor's rules (D3).
func ParseDescriptor(data json.RawMessage) (Descriptor, error) {
	return parseDescriptor(data)
}

// descriptorKeys are the keys of a version-1 descriptor.
var descriptorKeys = map[string]bool{
	"version": true, "provider": true, "agentProvider": true, "agentModel": true,
	"persona": true, "toolFilter": true, "providerData": true,
}

// parseDescriptor decodes one descriptor payload. It reads the version
// before anything else, so that a later version's keys are reported as
// an unsupported version rather than as unknown keys.
//
// It walks the object's keys itself instead of relying on
// json.Decoder.DisallowUnknownFields: that matches keys without regard
// to case and lets a repeated key silently win, so "Provider" or a
// second "provider" would slip through.
func parseDescriptor(data []byte) (Descriptor, error) {
	if !utf8.Valid(data) {
		return Descriptor{}, malformed("not UTF-8", nil)
	}
	fields, err := objectFields(data, "descriptor")
	if err != nil {
		return Descriptor{}, err
	}
	var d Descriptor
	if v, ok := fields["version"]; ok {
		if err := decodeValue(v, &d.Version); err != nil {
			return Descriptor{}, malformed(`"version" is not an integer`, err)
		}
	}
	if d.Version != DescriptorVersion {
		return Descriptor{}, &unsupportedVersionError{Version: d.Version}
	}
	if k, ok := unknownKey(fields, descriptorKeys); ok {
		return Descriptor{}, malformed(fmt.Sprintf("unknown key %q", k), nil)
	}
	for _, s := range []struct {
		key string
		dst *string
	}{{"provider", &d.Provider}, {"agentProvider", &d.AgentProvider}, {"agentModel", &d.AgentModel}} {
		if v, ok := fields[s.key]; ok {
			if err := decodeValue(v, s.dst); err != nil {
				return Descriptor{}, malformed(fmt.Sprintf("%q is not a string", s.key), err)
			}
		}
	}
	if v, ok := fields["persona"]; ok {
		var p string
		if err := decodeValue(v, &p); err != nil {
			return Descriptor{}, malformed(`"persona" is not a string`, err)
		}
		d.Persona = &p
	}
	if v, ok := fields["toolFilter"]; ok {
		f, err := decodeFilter(v)
		if err != nil {
			return Descriptor{}, err
		}
		d.ToolFilter = f
	}
	if v, ok := fields["providerData"]; ok {
		d.ProviderData = v // checked and copied by SnapshotDescriptor
	}
	return SnapshotDescriptor(d)
}

// decodeFilter decodes a tool filter object strictly; SnapshotDescriptor
// then checks its names.
func decodeFilter(raw json.RawMessage) (*subagent.ToolFilter, error) {
	fields, err := objectFields(raw, "toolFilter")
	if err != nil {
		return nil, err
	}
	if k, ok := unknownKey(fields, filterKeys); ok {
		return nil, malformed(fmt.Sprintf("unknown toolFilter key %q", k), nil)
	}
	f := &subagent.ToolFilter{}
	for _, m := range []struct {
		key string
		dst *[]string
	}{{"allow", &f.Allow}, {"deny", &f.Deny}} {
		if v, ok := fields[m.key]; ok {
			if err := decodeValue(v, m.dst); err != nil {
				return nil, malformed(fmt.Sprintf("toolFilter %q is not a list of strings", m.key), err)
			}
		}
	}
	return f, nil
}

// filterKeys are the keys of a tool filter.
var filterKeys = map[string]bool{"allow": true, "deny": true}

// unknownKey returns the first key of fields, in sorted order, that known
// lacks, so that the error names the same key every time.
func unknownKey(fields map[string]json.RawMessage, known map[string]bool) (string, bool) {
	var unknown []string
	for k := range fields {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", false
	}
	slices.Sort(unknown)
	return unknown[0], true
}

// objectFields splits data, which must be exactly one JSON object, into
// its members: no trailing data and no key twice. what names the object
// in errors.
func objectFields(data []byte, what string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed(what+" is not JSON", err)
	}
	if tok != json.Delim('{') {
		return nil, malformed(what+" is not a JSON object", nil)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(what+" is not JSON", err)
		}
		key, ok := tok.(string)
		if !ok { // the decoder only yields strings here; be safe anyway
			return nil, malformed(what+" is not JSON", nil)
		}
		if _, dup := fields[key]; dup {
			return nil, malformed(fmt.Sprintf("%s repeats key %q", what, key), nil)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, malformed(what+" is not JSON", err)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, malformed(what+" is not JSON", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed(what+" has trailing data", err)
	}
	return fields, nil
}

// decodeValue decodes one JSON value into v, refusing null: encoding/json
// would take it as "leave v alone", and Record never writes it.
func decodeValue(raw json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null")
	}
	return json.Unmarshal(raw, v)
}

func malformed(reason string, err error) error {
	return &DescriptorError{Reason: reason, Err: err}
}
