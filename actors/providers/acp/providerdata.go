package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// providerDataVersion is the version of ProviderData this package writes
// and reads.
const providerDataVersion = 1

// ProviderData is what an ACP child's descriptor keeps of it
// (persistence.Descriptor.ProviderData), version 1:
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

// encode returns d as version-1 JSON.
func (d ProviderData) encode() (json.RawMessage, error) {
	d.Version = providerDataVersion
	return json.Marshal(d)
}

// ParseProviderData validates a descriptor's provider data strictly (every
// key known and present once, exact case, no null). Data of another
// version fails with subagent.ErrNotResumable; malformed
// data is a *subagent.InvalidRequestError wrapping
// persistence.ErrMalformedDescriptor.
func ParseProviderData(raw json.RawMessage) (ProviderData, error) {
	if len(raw) == 0 {
		return ProviderData{}, &notResumableError{Reason: "its descriptor has no ACP provider data"}
	}
	bad := func(reason string, err error) error {
		return &subagent.InvalidRequestError{Field: "continuation", Reason: "ACP provider data: " + reason,
			Fault: malformed("ACP provider data: "+reason, err)}
	}
	var d ProviderData
	if found, err := jsonv2.Member(raw, "version", &d.Version); err != nil {
		return ProviderData{}, bad(err.Error(), err)
	} else if !found {
		return ProviderData{}, bad(`no "version"`, nil)
	}
	if d.Version != providerDataVersion {
		return ProviderData{}, &notResumableError{Reason: fmt.Sprintf("ACP provider data version %d is not supported (want %d)", d.Version, providerDataVersion)}
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

// malformed is a malformed descriptor's error, as persistence words it.
func malformed(reason string, err error) error {
	if err == nil {
		return fmt.Errorf("%w: %s", persistence.ErrMalformedDescriptor, reason)
	}
	return fmt.Errorf("%w: %s: %w", persistence.ErrMalformedDescriptor, reason, err)
}
