// Package acpdata is what an ACP child keeps and reports beyond the
// contract, shared by the acp provider and the node: the provider data of
// its descriptor (ParseProviderData) and the progress kinds it adds to
// subagent's.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package acpdata

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/subagent"
)

// providerDataVersion is the version of ProviderData this package writes
// and reads.
const providerDataVersion = 1

// ProviderData is what an ACP child's descriptor keeps of it
// (descriptor.Descriptor.ProviderData), version 1:
//
//	{"version":1,"sessionId":"…","loadSession":true,"cwd":"/abs/dir"}
//
// The agent's session id and whether the agent advertised loadSession when
// the child started decide whether it can be resumed; cwd is the directory
// the session belongs to, where a resumed agent runs again.
type ProviderData struct {
	Version     int    `json:"version"`
	SessionID   string `json:"sessionId"`
	LoadSession bool   `json:"loadSession"`
	Cwd         string `json:"cwd"`
}

// Encode returns d as version-1 JSON.
func (d ProviderData) Encode() (json.RawMessage, error) {
	d.Version = providerDataVersion
	return json.Marshal(d)
}

// ParseProviderData validates a descriptor's provider data strictly (every
// key known and present once, exact case, no null). Data of another
// version fails with subagent.ErrNotResumable; malformed data is a
// *subagent.InvalidRequestError wrapping descriptor.ErrMalformed.
func ParseProviderData(raw json.RawMessage) (ProviderData, error) {
	if len(raw) == 0 {
		return ProviderData{}, &NotResumableError{Reason: "its descriptor has no ACP provider data"}
	}
	// bad is malformed data, with the fault worded as package descriptor
	// words a malformed descriptor.
	bad := func(reason string, err error) error {
		reason = "ACP provider data: " + reason
		fault := fmt.Errorf("%w: %s", descriptor.ErrMalformed, reason)
		if err != nil {
			fault = fmt.Errorf("%w: %s: %w", descriptor.ErrMalformed, reason, err)
		}
		return &subagent.InvalidRequestError{Field: "continuation", Reason: reason, Fault: fault}
	}
	var d ProviderData
	if found, err := jsonv2.Member(raw, "version", &d.Version); err != nil {
		return ProviderData{}, bad(err.Error(), err)
	} else if !found {
		return ProviderData{}, bad(`no "version"`, nil)
	}
	if d.Version != providerDataVersion {
		return ProviderData{}, &NotResumableError{Reason: fmt.Sprintf("ACP provider data version %d is not supported (want %d)", d.Version, providerDataVersion)}
	}
	// Every key is required: pointers tell a missing one.
	var w struct {
		Version     int     `json:"version"`
		SessionID   *string `json:"sessionId"`
		LoadSession *bool   `json:"loadSession"`
		Cwd         *string `json:"cwd"`
	}
	if err := jsonv2.Unmarshal(raw, &w); err != nil {
		return ProviderData{}, bad(err.Error(), err)
	}
	switch {
	case w.SessionID == nil:
		return ProviderData{}, bad(`no "sessionId"`, nil)
	case w.LoadSession == nil:
		return ProviderData{}, bad(`no "loadSession"`, nil)
	case w.Cwd == nil:
		return ProviderData{}, bad(`no "cwd"`, nil)
	}
	d.SessionID, d.LoadSession, d.Cwd = *w.SessionID, *w.LoadSession, *w.Cwd
	switch {
	case d.SessionID == "" || !utf8.ValidString(d.SessionID):
		return ProviderData{}, bad("empty or invalid sessionId", nil)
	case !filepath.IsAbs(d.Cwd):
		return ProviderData{}, bad(fmt.Sprintf("cwd %q is not absolute", d.Cwd), nil)
	}
	return d, nil
}

// NotResumableError says why a child cannot be resumed; it wraps
// subagent.ErrNotResumable. Resume returns it before any process starts
// when the child's descriptor says its agent cannot load sessions.
type NotResumableError struct {
	Reason string
	Err    error // the underlying error, when there is one
}

func (e *NotResumableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("acp: child is not resumable: %s: %v", e.Reason, e.Err)
	}
	return "acp: child is not resumable: " + e.Reason
}

// Unwrap returns subagent.ErrNotResumable and the cause, if any.
func (e *NotResumableError) Unwrap() []error {
	if e.Err == nil {
		return []error{subagent.ErrNotResumable}
	}
	return []error{subagent.ErrNotResumable, e.Err}
}
