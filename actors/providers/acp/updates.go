package acp

import (
	"cmp"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/subagent"
)

// maxEventText caps the text of one progress event, so that one huge
// chunk does not travel to every listener whole.
const maxEventText = 4096

// maxTracked caps the tool calls a turn remembers until they finish; an
// agent that opens more without finishing them gets its later ones
// reported by id.
const maxTracked = 256

// maxKept caps each string a turn keeps of a tool call (its id, title and
// kind), so that the calls remembered hold at most maxTracked × 3 ×
// maxKept bytes (about 400 KB) whatever their size on the wire.
const maxKept = 512

// turnState folds the session updates of one turn into the answer and the
// progress events. It is pure: no I/O, no locks (its owner serialises
// calls), so that the fuzz target can drive it directly. Memory stays
// bounded whatever the agent sends: the answer is cut at max bytes, at
// most maxTracked tool calls are remembered, each within maxKept.
type turnState struct {
	runID     string
	max       int
	out       strings.Builder
	dropped   int                         // bytes of answer past max
	calls     map[sdk.ToolCallId]toolInfo // started, not yet finished
	finalSent bool
}

// toolInfo is what a turn remembers of a tool call until it finishes.
type toolInfo struct{ title, kind string }

// merge is info with the title and kind an update gives, when it gives
// them.
func (info toolInfo) merge(title *string, kind *sdk.ToolKind) toolInfo {
	if title != nil && *title != "" {
		info.title = keep(*title)
	}
	if kind != nil && *kind != "" {
		info.kind = keep(string(*kind))
	}
	return info
}

func newTurnState(runID string, max int) *turnState {
	return &turnState{runID: runID, max: max, calls: map[sdk.ToolCallId]toolInfo{}}
}

// apply folds one update in and returns the progress it makes. Variants
// are trusted only when their discriminator names them: the SDK fills an
// unknown kind into whichever variant its fields fit.
func (t *turnState) apply(u sdk.SessionUpdate) []subagent.RunProgress {
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.SessionUpdate == "agent_message_chunk":
		text := blockText(u.AgentMessageChunk.Content)
		if text == "" {
			return nil
		}
		t.appendAnswer(text)
		return t.event(subagent.TextDelta, text, false)
	case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.SessionUpdate == "agent_thought_chunk":
		if text := blockText(u.AgentThoughtChunk.Content); text != "" {
			return t.event(acpdata.ThoughtText, text, false)
		}
		return nil
	case u.ToolCall != nil && u.ToolCall.SessionUpdate == "tool_call":
		c := u.ToolCall
		title := orID(c.Title, c.ToolCallId)
		evs := t.event(subagent.ToolCallStarted, title, false)
		switch c.Status {
		case sdk.ToolCallStatusCompleted, sdk.ToolCallStatusFailed:
			evs = append(evs, t.event(subagent.ToolCallFinished, title, c.Status == sdk.ToolCallStatusFailed)...)
		default:
			id := keptID(c.ToolCallId)
			if _, ok := t.calls[id]; ok || len(t.calls) < maxTracked {
				t.calls[id] = toolInfo{title: keep(title), kind: keep(string(c.Kind))}
			}
		}
		return evs
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.SessionUpdate == "tool_call_update":
		c := u.ToolCallUpdate
		id := keptID(c.ToolCallId)
		info, known := t.calls[id]
		info = info.merge(c.Title, c.Kind)
		if c.Status == nil || (*c.Status != sdk.ToolCallStatusCompleted && *c.Status != sdk.ToolCallStatusFailed) {
			if known {
				t.calls[id] = info
			}
			return nil
		}
		delete(t.calls, id)
		return t.event(subagent.ToolCallFinished, orID(info.title, c.ToolCallId), *c.Status == sdk.ToolCallStatusFailed)
	case u.Plan != nil && u.Plan.SessionUpdate == "plan":
		var b strings.Builder
		for i, e := range u.Plan.Entries {
			if b.Len() > maxEventText {
				break // the event keeps no more
			}
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "[%s] %s", truncate(string(e.Status), maxKept), truncate(e.Content, maxEventText))
		}
		return t.event(acpdata.PlanUpdated, b.String(), false)
	}
	if kind := knownKind(u); kind != "" {
		return t.event(acpdata.OtherUpdate, kind, false)
	}
	return nil // an unknown kind: nothing we can say about it
}

// knownKind names the other update kinds we recognise by discriminator.
func knownKind(u sdk.SessionUpdate) string {
	var kind string
	switch {
	case u.UserMessageChunk != nil:
		kind = u.UserMessageChunk.SessionUpdate
	case u.AvailableCommandsUpdate != nil:
		kind = u.AvailableCommandsUpdate.SessionUpdate
	case u.CurrentModeUpdate != nil:
		kind = u.CurrentModeUpdate.SessionUpdate
	case u.ConfigOptionUpdate != nil:
		kind = u.ConfigOptionUpdate.SessionUpdate
	case u.SessionInfoUpdate != nil:
		kind = u.SessionInfoUpdate.SessionUpdate
	case u.UsageUpdate != nil:
		kind = u.UsageUpdate.SessionUpdate
	}
	switch kind {
	case "user_message_chunk", "available_commands_update", "current_mode_update",
		"config_option_update", "session_info_update", "usage_update":
		return kind
	}
	return ""
}

// appendAnswer adds text to the answer up to max bytes, cutting on a rune
// boundary.
func (t *turnState) appendAnswer(text string) {
	room := t.max - t.out.Len()
	if t.dropped > 0 || room <= 0 {
		t.dropped += len(text)
		return
	}
	if len(text) > room {
		cut := truncate(text, room)
		t.out.WriteString(cut)
		t.dropped += len(text) - len(cut)
		return
	}
	t.out.WriteString(text)
}

// answer is the turn's output: the agent's text, with a note when it was
// cut.
func (t *turnState) answer() []subagent.ContentBlock {
	if t.out.Len() == 0 && t.dropped == 0 {
		return nil
	}
	out := []subagent.ContentBlock{subagent.Text(t.out.String())}
	if t.dropped > 0 {
		out = append(out, subagent.Text(fmt.Sprintf("[output truncated: %d more bytes from the agent were dropped]", t.dropped)))
	}
	return out
}

func (t *turnState) event(kind subagent.ProgressKind, text string, isError bool) []subagent.RunProgress {
	if len(text) > maxEventText {
		text = truncate(text, maxEventText) + "…"
	}
	// One prompt turn is the child's one "model call" as far as the
	// parent can tell: the agent's own calls are not visible over ACP.
	return []subagent.RunProgress{{RunID: t.runID, Kind: kind, Step: 1, Text: text, IsError: isError}}
}

// known returns what the turn knows of a tool call the agent asks
// permission for, completed by what the request itself says.
func (t *turnState) known(c sdk.ToolCallUpdate) ToolCall {
	info := t.calls[keptID(c.ToolCallId)].merge(c.Title, c.Kind)
	return ToolCall{ID: keep(string(c.ToolCallId)), Title: info.title, Kind: cmp.Or(info.kind, string(sdk.ToolKindOther)), RunID: t.runID}
}

// keep is s cut to maxKept bytes in a string of its own: a substring
// would keep the whole of what the agent sent alive.
func keep(s string) string { return strings.Clone(truncate(s, maxKept)) }

// keptID is the key a tool call is remembered under: its id cut as keep
// cuts it, so that every update of one call finds it.
func keptID(id sdk.ToolCallId) sdk.ToolCallId { return sdk.ToolCallId(keep(string(id))) }

// blockText is a content block's text, "" for other kinds.
func blockText(b sdk.ContentBlock) string {
	// The SDK fills an unknown content type into whichever variant its
	// fields fit: trust the type field.
	if b.Text != nil && b.Text.Type == "text" {
		return b.Text.Text
	}
	return ""
}

func orID(title string, id sdk.ToolCallId) string {
	if strings.TrimSpace(title) != "" {
		return title
	}
	return "tool call " + string(id)
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// stopResult maps an agent's stop reason onto ours. Anything we do not
// know is an error that keeps the agent's words.
func stopResult(r sdk.StopReason) (subagent.StopReason, string) {
	switch r {
	case sdk.StopReasonEndTurn:
		return subagent.Completed, ""
	case sdk.StopReasonCancelled:
		return subagent.Aborted, "the agent cancelled its turn"
	case sdk.StopReasonMaxTokens:
		return subagent.MaxTokens, "the agent's model reached its token limit"
	case sdk.StopReasonRefusal:
		return subagent.Refusal, "the agent refused"
	case sdk.StopReasonMaxTurnRequests:
		return subagent.Error, "the agent stopped: max_turn_requests (it reached its limit of model requests in one turn)"
	}
	return subagent.Error, fmt.Sprintf("the agent stopped with an unknown stop reason %q", truncate(string(r), 200))
}
