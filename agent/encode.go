package agent

import (
	"sync"

	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// appendRecord appends m's record data, its JSON; it fails when a tool
// call's arguments are not JSON.
func appendRecord(dst []byte, m *Message) ([]byte, error) {
	return jsonv2.AppendMarshal(dst, m)
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
	// msg and stop hold what is being written: pointers to them, in the
	// pooled batch, reach the encoder without an allocation.
	msg  Message
	stop agentlog.Stop
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
func (b *batch) add(m *Message, own ownership) error {
	start := len(b.data)
	b.msg = *m
	data, err := appendRecord(b.data, &b.msg)
	b.msg = Message{}
	if err != nil {
		return err
	}
	b.data = data
	b.stored = append(b.stored, *m)
	if err := decoded(&b.stored[len(b.stored)-1], data[start:], own); err != nil {
		return err
	}
	b.recs = append(b.recs, persistence.Record{Kind: persistence.KindMessage, Data: data[start:]})
	return nil
}

// addRecord appends r as it is (a log-only record).
func (b *batch) addRecord(r persistence.Record) {
	start := len(b.data)
	b.data = append(b.data, r.Data...)
	b.recs = append(b.recs, persistence.Record{Kind: r.Kind, Data: b.data[start:]})
}

// addStop appends the agentlog.KindStop record of res.
func (b *batch) addStop(res *subagent.Result) {
	start := len(b.data)
	// A Stop always encodes: it has strings and integers only.
	b.stop = agentlog.Stop{StopReason: res.StopReason, Detail: res.Detail, Usage: res.Usage}
	b.data, _ = jsonv2.AppendMarshal(b.data, &b.stop)
	b.stop = agentlog.Stop{}
	b.recs = append(b.recs, persistence.Record{Kind: agentlog.KindStop, Data: b.data[start:]})
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
