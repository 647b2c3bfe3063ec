// Package wire converts between the contract types of package subagent and
// their protobuf forms in package messages, for the actors that send them
// across a process or node boundary.
package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// FromContent converts contract content blocks to their wire form.
func FromContent(blocks []subagent.ContentBlock) []*messages.ContentBlock {
	out := make([]*messages.ContentBlock, len(blocks))
	for i, b := range blocks {
		out[i] = &messages.ContentBlock{Type: b.Type, Text: b.Text}
	}
	return out
}

// ToContent converts wire content blocks to contract ones.
func ToContent(blocks []*messages.ContentBlock) []subagent.ContentBlock {
	out := make([]subagent.ContentBlock, len(blocks))
	for i, b := range blocks {
		out[i] = subagent.ContentBlock{Type: b.GetType(), Text: b.GetText()}
	}
	return out
}

// FromResult converts a contract result to its wire form. Cause stays in
// this process.
func FromResult(r subagent.Result) *messages.Result {
	return &messages.Result{
		Output:     FromContent(r.Output),
		Structured: r.Structured,
		StopReason: string(r.StopReason),
		Detail:     r.Detail,
		Usage:      fromUsage(r.Usage),
	}
}

// ToResult converts a wire result to a contract one.
func ToResult(w *messages.Result) subagent.Result {
	return subagent.Result{
		Output:     ToContent(w.GetOutput()),
		Structured: w.GetStructured(),
		StopReason: subagent.StopReason(w.GetStopReason()),
		Detail:     w.GetDetail(),
		Usage:      toUsage(w.GetUsage()),
	}
}

func fromUsage(u *subagent.Usage) *messages.Usage {
	if u == nil {
		return nil
	}
	return &messages.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens), CachedInputTokens: int64(u.CachedInputTokens)}
}

func toUsage(u *messages.Usage) *subagent.Usage {
	if u == nil {
		return nil
	}
	return &subagent.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens), CachedInputTokens: int(u.CachedInputTokens)}
}

// FromEvent converts a contract event to its wire form. Every event type
// of package subagent converts; an event type added without a case here
// is an error, which the tests catch.
func FromEvent(ev subagent.Event) (proto.Message, error) {
	switch e := ev.(type) {
	case subagent.ProviderAdded:
		return &messages.ProviderAdded{Provider: e.Provider}, nil
	case subagent.ProviderRemoved:
		return &messages.ProviderRemoved{Name: e.Name}, nil
	case subagent.RunStarted:
		return &messages.RunStarted{RunId: e.RunID, Provider: e.Provider, SessionId: e.SessionID, Local: e.Local}, nil
	case subagent.RunEnded:
		return &messages.RunEnded{RunId: e.RunID, Provider: e.Provider, SessionId: e.SessionID, Local: e.Local,
			StopReason: string(e.StopReason), LastAssistantMessage: e.LastAssistantMessage, Usage: fromUsage(e.Usage),
			Result: FromResult(e.Result)}, nil
	case subagent.RunProgress:
		return &messages.RunProgress{RunId: e.RunID, Kind: string(e.Kind), Step: int64(e.Step), Text: e.Text,
			IsError: e.IsError, Usage: fromUsage(e.Usage)}, nil
	case subagent.ListenerOverflow:
		return &messages.ListenerOverflow{Bound: int64(e.Bound)}, nil
	case subagent.ListenerFailed:
		return &messages.ListenerFailed{Reason: e.Reason}, nil
	}
	return nil, fmt.Errorf("messages: no wire form for event %T", ev)
}

// ToEvent converts a wire event to the contract event listeners receive.
func ToEvent(m any) (subagent.Event, error) {
	switch e := m.(type) {
	case *messages.ProviderAdded:
		return subagent.ProviderAdded{Provider: e.Provider}, nil
	case *messages.ProviderRemoved:
		return subagent.ProviderRemoved{Name: e.Name}, nil
	case *messages.RunStarted:
		return subagent.RunStarted{RunID: e.RunId, Provider: e.Provider, SessionID: e.SessionId, Local: e.Local}, nil
	case *messages.RunEnded:
		return subagent.RunEnded{RunID: e.RunId, Provider: e.Provider, SessionID: e.SessionId, Local: e.Local,
			StopReason: subagent.StopReason(e.StopReason), LastAssistantMessage: e.LastAssistantMessage, Usage: toUsage(e.Usage),
			Result: ToResult(e.Result)}, nil
	case *messages.RunProgress:
		return subagent.RunProgress{RunID: e.RunId, Kind: subagent.ProgressKind(e.Kind), Step: int(e.Step), Text: e.Text,
			IsError: e.IsError, Usage: toUsage(e.Usage)}, nil
	case *messages.ListenerOverflow:
		return subagent.ListenerOverflow{Bound: int(e.Bound)}, nil
	case *messages.ListenerFailed:
		return subagent.ListenerFailed{Reason: e.Reason}, nil
	}
	return nil, fmt.Errorf("messages: %T is not an event", m)
}
