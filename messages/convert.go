package messages

import (
	"fmt"

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

// FromResult converts a contract result to its wire form.
func FromResult(r subagent.Result) *Result {
	w := &Result{
		Output:     FromContent(r.Output),
		Structured: r.Structured,
		StopReason: string(r.StopReason),
		Detail:     r.Detail,
	}
	if r.Usage != nil {
		w.Usage = &Usage{InputTokens: int64(r.Usage.InputTokens), OutputTokens: int64(r.Usage.OutputTokens)}
	}
	return w
}

// ToResult converts a wire result to a contract one.
func ToResult(w *Result) subagent.Result {
	r := subagent.Result{
		Output:     ToContent(w.GetOutput()),
		Structured: w.GetStructured(),
		StopReason: subagent.StopReason(w.GetStopReason()),
		Detail:     w.GetDetail(),
	}
	if u := w.GetUsage(); u != nil {
		r.Usage = &subagent.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens)}
	}
	return r
}

// ToEvent converts a wire event to the contract event listeners receive.
func ToEvent(m any) (subagent.Event, error) {
	switch e := m.(type) {
	case *ProviderAdded:
		return subagent.ProviderAdded{Provider: e.Provider}, nil
	case *ProviderRemoved:
		return subagent.ProviderRemoved{Name: e.Name}, nil
	case *RunStarted:
		return subagent.RunStarted{RunID: e.RunId, Provider: e.Provider, ID: e.Id, Local: e.Local}, nil
	case *RunEnded:
		return subagent.RunEnded{RunID: e.RunId, Provider: e.Provider, ID: e.Id, Local: e.Local,
			StopReason: subagent.StopReason(e.StopReason), LastAssistantMessage: e.LastAssistantMessage}, nil
	}
	return nil, fmt.Errorf("messages: %T is not an event", m)
}
