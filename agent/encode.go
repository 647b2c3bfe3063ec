package agent

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/subactor/subactor/internal/jsontext"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// The loop writes its records itself: json.Marshal boxes the message,
// boxes every argument slice to call its MarshalJSON and copies out each
// record's bytes, where the loop needs one buffer per append. What it
// writes is, byte for byte, what json.Marshal writes (the tests compare
// the two on random messages, and check that the types still have the
// fields written here).

// appendMessage appends m as json.Marshal(m) writes it; ok is false when a
// tool call's arguments are not JSON.
func appendMessage(dst []byte, m Message) (_ []byte, ok bool) {
	dst = append(dst, `{"role":`...)
	dst = jsontext.AppendString(dst, string(m.Role))
	if len(m.Content) > 0 {
		dst = append(dst, `,"content":`...)
		dst = appendContent(dst, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"toolCalls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = jsontext.AppendString(dst, c.ID)
			dst = append(dst, `,"name":`...)
			dst = jsontext.AppendString(dst, c.Name)
			dst = append(dst, `,"args":`...)
			if dst, ok = jsontext.AppendRaw(dst, c.Args); !ok {
				return dst, false
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"toolCallId":`...)
		dst = jsontext.AppendString(dst, m.ToolCallID)
	}
	if m.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	return append(dst, '}'), true
}

func appendContent(dst []byte, blocks []subagent.ContentBlock) []byte {
	dst = append(dst, '[')
	for i, c := range blocks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = jsontext.AppendString(dst, c.Type)
		if c.Text != "" {
			dst = append(dst, `,"text":`...)
			dst = jsontext.AppendString(dst, c.Text)
		}
		if c.Source != "" {
			dst = append(dst, `,"source":`...)
			dst = jsontext.AppendString(dst, c.Source)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendStop appends s as json.Marshal(s) writes it.
func appendStop(dst []byte, s Stop) []byte {
	dst = append(dst, `{"stopReason":`...)
	dst = jsontext.AppendString(dst, string(s.StopReason))
	if s.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = jsontext.AppendString(dst, s.Detail)
	}
	if u := s.Usage; u != nil {
		dst = append(dst, `,"usage":{"inputTokens":`...)
		dst = strconv.AppendInt(dst, int64(u.InputTokens), 10)
		dst = append(dst, `,"outputTokens":`...)
		dst = strconv.AppendInt(dst, int64(u.OutputTokens), 10)
		if u.CachedInputTokens != 0 {
			dst = append(dst, `,"cachedInputTokens":`...)
			dst = strconv.AppendInt(dst, int64(u.CachedInputTokens), 10)
		}
		dst = append(dst, '}')
	}
	if len(s.Output) > 0 {
		dst = append(dst, `,"output":`...)
		dst = appendContent(dst, s.Output)
	}
	return append(dst, '}')
}

// appendRecord appends m's record data.
func appendRecord(dst []byte, m Message) ([]byte, error) {
	if out, ok := appendMessage(dst, m); ok {
		return out, nil
	}
	// Arguments that are not JSON: json.Marshal says why.
	data, err := json.Marshal(m)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

// batch is the memory of one append: the records and their data, and the
// turns as the history keeps them. Batches are pooled: a store copies what
// it is given (persistence.Store), so the memory is free again once the
// append returns, and an agent keeps none of it between appends (a parked
// child costs what it holds).
type batch struct {
	data   []byte
	recs   []persistence.Record
	stored []Message
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// maxPooledData bounds the data buffer a batch keeps for the next append.
const maxPooledData = 64 << 10

func getBatch() *batch { return batches.Get().(*batch) }

// release clears what the batch refers to and pools it.
func (b *batch) release() {
	clear(b.recs)
	clear(b.stored)
	b.recs, b.stored = b.recs[:0], b.stored[:0]
	b.data = b.data[:0]
	if cap(b.data) > maxPooledData {
		b.data = nil
	}
	batches.Put(b)
}

// add appends the record of m, kind KindMessage, and m as decoding it
// yields it (see decoded).
func (b *batch) add(m Message, own ownership) error {
	start := len(b.data)
	data, err := appendRecord(b.data, m)
	if err != nil {
		return err
	}
	b.data = data
	stored, err := decoded(m, data[start:], own)
	if err != nil {
		return err
	}
	b.recs = append(b.recs, persistence.Record{Kind: persistence.KindMessage, Data: data[start:]})
	b.stored = append(b.stored, stored)
	return nil
}

// addRecord appends r as it is (a log-only record).
func (b *batch) addRecord(r persistence.Record) {
	start := len(b.data)
	b.data = append(b.data, r.Data...)
	b.recs = append(b.recs, persistence.Record{Kind: r.Kind, Data: b.data[start:]})
}

// addStop appends the KindStop record of res.
func (b *batch) addStop(res subagent.Result) {
	start := len(b.data)
	b.data = appendStop(b.data, Stop{StopReason: res.StopReason, Detail: res.Detail, Usage: res.Usage})
	b.recs = append(b.recs, persistence.Record{Kind: KindStop, Data: b.data[start:]})
}

// records returns the records added, their data in the batch's final
// buffer (which may have moved as it grew).
func (b *batch) records() []persistence.Record {
	at := 0
	for i := range b.recs {
		n := len(b.recs[i].Data)
		b.recs[i].Data = b.data[at : at+n : at+n]
		at += n
	}
	return b.recs
}
