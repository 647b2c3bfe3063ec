package acpdata

import "github.com/subactor/subactor/subagent"

// Progress kinds an ACP child reports besides subagent's own (E6). Parents
// that do not know them may ignore them.
const (
	// ThoughtText is a piece of the agent's reasoning as it streams.
	ThoughtText subagent.ProgressKind = "acp-thought"
	// PlanUpdated carries the agent's whole current plan, one entry a
	// line: "[status] content".
	PlanUpdated subagent.ProgressKind = "acp-plan"
	// PermissionAnswered says how a permission request was answered:
	// "allowed: TITLE", "rejected: TITLE" or "cancelled: TITLE".
	PermissionAnswered subagent.ProgressKind = "acp-permission"
	// OtherUpdate names any other session update the agent sent
	// (available_commands_update, current_mode_update, usage_update…).
	OtherUpdate subagent.ProgressKind = "acp-update"
	// LimitReached says, once a run and with IsError set, that a bound
	// of the provider refused something the agent asked (too many
	// requests in flight, or too many bytes held for them): the agent
	// got an error answer. Text says which.
	LimitReached subagent.ProgressKind = "acp-limit"
)
