package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"

	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/persistence/internal/rules"
	"github.com/subactor/subactor/subagent"
)

// sessionMeta is a session's bookkeeping in boltStore, stored under metaKey.
type sessionMeta struct {
	// Created numbers sessions in creation order.
	Created uint64 `json:"created"`
	// Compacted is the highest sequence number a Compact put its summary
	// under: below it the log may have gaps, above it none.
	Compacted uint64 `json:"compacted,omitempty"`
	// Removed is how many records Compacts removed net of their
	// summaries, so that the number of records stored is the sequence
	// minus Removed.
	Removed uint64 `json:"removed,omitempty"`
}

func encodeMeta(m sessionMeta) []byte {
	body, _ := json.Marshal(m) // three integers: cannot fail
	return frame(body)
}

// readHead decodes a session's header and meta.
func readHead(id string, sb *bolt.Bucket) (subagent.SessionHeader, sessionMeta, error) {
	h, err := readHeader(id, sb)
	if err != nil {
		return subagent.SessionHeader{}, sessionMeta{}, err
	}
	m, err := readMeta(id, sb)
	if err != nil {
		return subagent.SessionHeader{}, sessionMeta{}, err
	}
	return h, m, nil
}

func readHeader(id string, sb *bolt.Bucket) (subagent.SessionHeader, error) {
	corrupt := func(err error) error { return &CorruptError{SessionID: id, Part: "header", Err: err} }
	hv := sb.Get(headerKey)
	if hv == nil {
		return subagent.SessionHeader{}, corrupt(errors.New("missing"))
	}
	var h subagent.SessionHeader
	if err := decodeJSON(hv, &h); err != nil {
		return subagent.SessionHeader{}, corrupt(err)
	}
	if err := validateHeader(h); err != nil {
		return subagent.SessionHeader{}, corrupt(rules.NotInvalid(err))
	}
	if h.SessionID != id {
		return subagent.SessionHeader{}, corrupt(fmt.Errorf("names session %q", h.SessionID))
	}
	return h, nil
}

func readMeta(id string, sb *bolt.Bucket) (sessionMeta, error) {
	corrupt := func(err error) error { return &CorruptError{SessionID: id, Part: "meta", Err: err} }
	mv := sb.Get(metaKey)
	if mv == nil {
		return sessionMeta{}, corrupt(errors.New("missing"))
	}
	var m sessionMeta
	if err := decodeJSON(mv, &m); err != nil {
		return sessionMeta{}, corrupt(err)
	}
	last := sb.Sequence()
	switch {
	case m.Created == 0:
		return sessionMeta{}, corrupt(errors.New("no creation number"))
	case m.Compacted > last || m.Removed > last:
		return sessionMeta{}, corrupt(fmt.Errorf("compaction past the log's end at %d", last))
	}
	return m, nil
}

// readEntries decodes a session's records after sequence number after
// and checks them against the layout: keys are sequence numbers up to the
// bucket's sequence, with no gap above m.Compacted and the last one
// present. From 0 it also counts the records against m.Removed, which
// finds a record missing below m.Compacted. Everything it returns is
// copied out of bbolt's memory, which is valid only inside the
// transaction.
func readEntries(id string, sb *bolt.Bucket, m sessionMeta, after uint64) ([]Entry, error) {
	corrupt := func(part string, seq uint64, err error) error {
		return &CorruptError{SessionID: id, Part: part, Seq: seq, Err: err}
	}
	last := sb.Sequence()
	if after >= last {
		return nil, nil
	}
	// next is the first sequence number that must be stored after prev:
	// below the compaction mark records may be gone, but not the summary
	// at the mark itself.
	next := func(prev uint64) uint64 {
		if prev < m.Compacted {
			return m.Compacted
		}
		return prev + 1
	}
	// The sequence is stored data too: cap what it may preallocate.
	entries := make([]Entry, 0, min(last-after, 1024))
	prev, stored := after, uint64(0)
	c := sb.Cursor()
	k, v := c.First()
	if after > 0 {
		k, v = c.Seek(seqKey(after + 1))
	}
	for ; k != nil; k, v = c.Next() {
		switch {
		case bytes.Equal(k, headerKey), bytes.Equal(k, metaKey):
			continue
		case v == nil:
			return nil, corrupt("layout", 0, fmt.Errorf("unexpected nested bucket %q", k))
		case len(k) != 8:
			return nil, corrupt("layout", 0, fmt.Errorf("unexpected key %q", k))
		}
		seq := binary.BigEndian.Uint64(k)
		switch want := next(prev); {
		case seq > last:
			return nil, corrupt("layout", 0, fmt.Errorf("record %d stored past the sequence at %d", seq, last))
		case seq > want: // keys come in order, so seq > prev
			return nil, corrupt("record", want, fmt.Errorf("missing (the next one stored is %d)", seq))
		}
		r, err := decodeRecord(v)
		if err != nil {
			return nil, corrupt("record", seq, err)
		}
		entries = append(entries, Entry{Seq: seq, Record: r})
		prev = seq
		stored++
	}
	if prev < last {
		return nil, corrupt("record", next(prev), fmt.Errorf("missing (%d records were appended)", last))
	}
	if after == 0 && stored != last-m.Removed {
		return nil, corrupt("layout", 0, fmt.Errorf("%d records stored, %d expected after compaction", stored, last-m.Removed))
	}
	return entries, nil
}

func frame(body []byte) []byte {
	v := make([]byte, frameHeader, frameHeader+len(body))
	v[0] = frameFormat
	binary.BigEndian.PutUint32(v[1:], crc32.Checksum(body, castagnoli))
	return append(v, body...)
}

// unframe checks v's frame and returns its body, which aliases v.
func unframe(v []byte) ([]byte, error) {
	switch {
	case len(v) < frameHeader:
		return nil, fmt.Errorf("truncated value (%d bytes)", len(v))
	case v[0] != frameFormat:
		return nil, fmt.Errorf("unknown value format %d", v[0])
	}
	body := v[frameHeader:]
	if want, got := binary.BigEndian.Uint32(v[1:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return body, nil
}

// decodeJSON unframes v and decodes its body into dst strictly
// (jsonv2.Unmarshal).
func decodeJSON(v []byte, dst any) error {
	body, err := unframe(v)
	if err != nil {
		return err
	}
	if err := jsonv2.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("bad JSON: %w", err)
	}
	return nil
}

// encodeRecords validates and encodes recs, or fails with ErrInvalid.
func encodeRecords(recs []Record) ([][]byte, error) {
	vals := make([][]byte, len(recs))
	for i, r := range recs {
		if err := validateRecord(r); err != nil {
			return nil, err
		}
		vals[i] = encodeRecord(r)
	}
	return vals, nil
}

func encodeRecord(r Record) []byte {
	body := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(r.Kind)+len(r.Data)), uint64(len(r.Kind)))
	body = append(body, r.Kind...)
	body = append(body, r.Data...)
	return frame(body)
}

func decodeRecord(v []byte) (Record, error) {
	body, err := unframe(v)
	if err != nil {
		return Record{}, err
	}
	n, size := binary.Uvarint(body)
	if size <= 0 || n > uint64(len(body)-size) {
		return Record{}, errors.New("bad kind length")
	}
	body = body[size:]
	r := Record{Kind: string(body[:n]), Data: bytes.Clone(body[n:])}
	if err := validateRecord(r); err != nil {
		return Record{}, rules.NotInvalid(err)
	}
	return r, nil
}
