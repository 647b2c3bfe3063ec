package main

// What the ACP children of a node acp session ask of their client goes to
// the editor (X1): their permission requests, as session/request_permission
// on a tool call of the asking child (its id is the child's run id, a
// slash and the agent's own tool call id), and, when the editor offers
// them and the agent server's entry allows them (read_files,
// write_files), their file requests, confined to the session's cwd.

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	acpprovider "github.com/subactor/subactor/actors/providers/acp"
)

// editorRelay relays one session's children's requests to the editor.
type editorRelay struct {
	s           *acpSession
	cwd         string
	read, write bool // the editor serves fs/read_text_file, fs/write_text_file
}

// apply makes c's children ask the editor: for permission, unless the
// server's entry names its own "permissions" policy, and for the files
// its entry allows, when the editor serves them.
func (r *editorRelay) apply(c *acpprovider.Config) {
	if c.Permissions == nil {
		c.Permissions = r.permission(c.Name)
	}
	if c.ReadFiles && r.read {
		c.RelayRead = r.readFile
	}
	if c.WriteFiles && r.write {
		c.RelayWrite = r.writeFile
	}
}

// The options the editor is offered: once, never always, so that a
// decision never outlives the request.
const (
	optionAllow  = "allow"
	optionReject = "reject"
)

// permission is the policy of provider's children: the editor decides,
// on a tool call of its own that the asking child's run id names.
func (r *editorRelay) permission(provider string) acpprovider.PermissionPolicy {
	return func(ctx context.Context, call acpprovider.ToolCall) bool {
		id := acp.ToolCallId(call.RunID + "/" + call.ID)
		title := provider + ": " + cmp.Or(call.Title, call.ID)
		kind := acp.ToolKind(call.Kind)
		_ = r.s.update(acp.StartToolCall(id, title, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartRawInput(map[string]any{"provider": provider, "runId": call.RunID, "toolCallId": call.ID})))
		resp, err := r.s.a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: acp.SessionId(r.s.id),
			ToolCall:  acp.ToolCallUpdate{ToolCallId: id, Title: &title, Kind: &kind},
			Options: []acp.PermissionOption{
				{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: optionAllow},
				{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: optionReject},
			},
		})
		allow := err == nil && resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == optionAllow
		status := acp.ToolCallStatusFailed
		if allow {
			status = acp.ToolCallStatusCompleted
		}
		_ = r.s.update(acp.UpdateToolCall(id, acp.WithUpdateStatus(status)))
		return allow
	}
}

// errOutsideCwd refuses a file outside the session's cwd.
var errOutsideCwd = errors.New("path is outside the session's working directory")

// inside reports whether path (absolute and clean, as the provider gives
// it) is in the session's cwd.
func (r *editorRelay) inside(path string) bool {
	rel, err := filepath.Rel(r.cwd, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func (r *editorRelay) readFile(ctx context.Context, _ string, path string, line, limit *int) (string, error) {
	if !r.inside(path) {
		return "", errOutsideCwd
	}
	resp, err := r.s.a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: acp.SessionId(r.s.id), Path: path, Line: line, Limit: limit})
	return resp.Content, err
}

func (r *editorRelay) writeFile(ctx context.Context, _ string, path, content string) error {
	if !r.inside(path) {
		return errOutsideCwd
	}
	_, err := r.s.a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: acp.SessionId(r.s.id), Path: path, Content: content})
	return err
}
