package messages

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/subagent"
)

// FromContent converts contract content blocks to their wire form.
func FromContent(blocks []subagent.ContentBlock) []*ContentBlock {
	out := make([]*ContentBlock, len(blocks))
	for i, b := range blocks {
		out[i] = &ContentBlock{Type: b.Type, Text: b.Text}
	}
	return out
}

// ToContent converts wire content blocks to contract ones.
func ToContent(blocks []*ContentBlock) []subagent.ContentBlock {
	out := make([]subagent.ContentBlock, len(blocks))
	for i, b := range blocks {
		out[i] = subagent.ContentBlock{Type: b.GetType(), Text: b.GetText()}
	}
	return out
}

// FromResult converts a contract result to its wire form. Cause stays in
// this process.
func FromResult(r subagent.Result) *Result {
	return &Result{
		Output:     FromContent(r.Output),
		Structured: r.Structured,
		StopReason: string(r.StopReason),
		Detail:     r.Detail,
		Usage:      fromUsage(r.Usage),
	}
}

// ToResult converts a wire result to a contract one.
func ToResult(w *Result) subagent.Result {
	return subagent.Result{
		Output:     ToContent(w.GetOutput()),
		Structured: w.GetStructured(),
		StopReason: subagent.StopReason(w.GetStopReason()),
		Detail:     w.GetDetail(),
		Usage:      toUsage(w.GetUsage()),
	}
}

func fromUsage(u *subagent.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens), CachedInputTokens: int64(u.CachedInputTokens)}
}

func toUsage(u *Usage) *subagent.Usage {
	if u == nil {
		return nil
	}
	return &subagent.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens), CachedInputTokens: int(u.CachedInputTokens)}
}

// FromEvent converts a contract event to its wire form. Every type in
// subagent.EventTypes converts; an event type added without a case here
// is an error, which the tests catch.
func FromEvent(ev subagent.Event) (proto.Message, error) {
	switch e := ev.(type) {
	case subagent.ProviderAdded:
		return &ProviderAdded{Provider: e.Provider}, nil
	case subagent.ProviderRemoved:
		return &ProviderRemoved{Name: e.Name}, nil
	case subagent.RunStarted:
		return &RunStarted{RunId: e.RunID, Provider: e.Provider, SessionId: e.SessionID, Local: e.Local}, nil
	case subagent.RunEnded:
		return &RunEnded{RunId: e.RunID, Provider: e.Provider, SessionId: e.SessionID, Local: e.Local,
			StopReason: string(e.StopReason), LastAssistantMessage: e.LastAssistantMessage, Usage: fromUsage(e.Usage)}, nil
	case subagent.RunProgress:
		return &RunProgress{RunId: e.RunID, Kind: string(e.Kind), Step: int64(e.Step), Text: e.Text,
			IsError: e.IsError, Usage: fromUsage(e.Usage)}, nil
	case subagent.ListenerOverflow:
		return &ListenerOverflow{Bound: int64(e.Bound)}, nil
	case subagent.ListenerFailed:
		return &ListenerFailed{Reason: e.Reason}, nil
	}
	return nil, fmt.Errorf("messages: no wire form for event %T", ev)
}

// ToEvent converts a wire event to the contract event listeners receive.
func ToEvent(m any) (subagent.Event, error) {
	switch e := m.(type) {
	case *ProviderAdded:
		return subagent.ProviderAdded{Provider: e.Provider}, nil
	case *ProviderRemoved:
		return subagent.ProviderRemoved{Name: e.Name}, nil
	case *RunStarted:
		return subagent.RunStarted{RunID: e.RunId, Provider: e.Provider, SessionID: e.SessionId, Local: e.Local}, nil
	case *RunEnded:
		return subagent.RunEnded{RunID: e.RunId, Provider: e.Provider, SessionID: e.SessionId, Local: e.Local,
			StopReason: subagent.StopReason(e.StopReason), LastAssistantMessage: e.LastAssistantMessage, Usage: toUsage(e.Usage)}, nil
	case *RunProgress:
		return subagent.RunProgress{RunID: e.RunId, Kind: subagent.ProgressKind(e.Kind), Step: int(e.Step), Text: e.Text,
			IsError: e.IsError, Usage: toUsage(e.Usage)}, nil
	case *ListenerOverflow:
		return subagent.ListenerOverflow{Bound: int(e.Bound)}, nil
	case *ListenerFailed:
		return subagent.ListenerFailed{Reason: e.Reason}, nil
	}
	return nil, fmt.Errorf("messages: %T is not an event", m)
}
