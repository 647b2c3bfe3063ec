package persistence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// benchData returns a message record of about 200 bytes, numbered n.
func benchData(n int) json.RawMessage {
	d := fmt.Appendf(nil, `{"role":"assistant","n":%d,"content":[{"type":"text","text":"%s"}]}`,
		n, bytes.Repeat([]byte("x"), 140))
	return d
}

func benchRecords(n int) []persistence.Record {
	recs := make([]persistence.Record, n)
	for i := range recs {
		recs[i] = persistence.Record{Kind: persistence.KindMessage, Data: benchData(i)}
	}
	return recs
}

// benchSessionLen is how many records a benchmarked session reaches
// before it is deleted and created again, so that a long run measures
// sessions of an agent's length rather than one ever-growing log.
const benchSessionLen = 64

func benchmarkMemoryAppend(b *testing.B, n int, at bool) {
	ctx := context.Background()
	s := persistence.NewMemory()
	h := subagent.SessionHeader{SessionID: "s1"}
	if err := s.Create(ctx, h); err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(n)
	var last uint64
	b.ReportAllocs()
	for b.Loop() {
		if last+uint64(n) > benchSessionLen {
			b.StopTimer()
			if err := s.Delete(ctx, "s1"); err != nil {
				b.Fatal(err)
			}
			if err := s.Create(ctx, h); err != nil {
				b.Fatal(err)
			}
			last = 0
			b.StartTimer()
		}
		if at {
			seq, err := s.AppendAt(ctx, "s1", last, recs...)
			if err != nil {
				b.Fatal(err)
			}
			last = seq
			continue
		}
		if err := s.Append(ctx, "s1", recs...); err != nil {
			b.Fatal(err)
		}
		last += uint64(n)
	}
}

func BenchmarkMemoryAppend(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("recs=%d", n), func(b *testing.B) { benchmarkMemoryAppend(b, n, false) })
	}
}

func BenchmarkMemoryAppendAt(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("recs=%d", n), func(b *testing.B) { benchmarkMemoryAppend(b, n, true) })
	}
}

func BenchmarkMemoryCreateWith(b *testing.B) {
	ctx := context.Background()
	s := persistence.NewMemory()
	h := subagent.SessionHeader{SessionID: "s1", ParentSessionID: "p", DelegationDepth: 1}
	recs := []persistence.Record{
		{Kind: descriptor.Kind, Data: benchData(0)},
		{Kind: persistence.KindMessage, Data: benchData(1)},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.CreateWith(ctx, h, recs...); err != nil {
			b.Fatal(err)
		}
		if err := s.Delete(ctx, "s1"); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLoadStore(b *testing.B) persistence.Backend {
	s := persistence.NewMemory()
	ctx := context.Background()
	if err := s.Create(ctx, subagent.SessionHeader{SessionID: "s1"}); err != nil {
		b.Fatal(err)
	}
	for _, r := range benchRecords(10) {
		if err := s.Append(ctx, "s1", r); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func BenchmarkMemoryLoad(b *testing.B) {
	ctx := context.Background()
	s := benchLoadStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, recs, err := s.Load(ctx, "s1"); err != nil || len(recs) != 10 {
			b.Fatal(len(recs), err)
		}
	}
}

func BenchmarkMemoryLoadFrom(b *testing.B) {
	ctx := context.Background()
	s := benchLoadStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, entries, err := s.LoadFrom(ctx, "s1", 0); err != nil || len(entries) != 10 {
			b.Fatal(len(entries), err)
		}
	}
}

// TestMemoryCopiesEveryRecord pins, beyond the conformance suite's one
// record, that Memory keeps its own copy of every record a call stores
// (the data of one call shares one allocation) and hands out copies that
// neither alias each other nor reach stored data, even when a caller
// appends to one.
func TestMemoryCopiesEveryRecord(t *testing.T) {
	ctx := t.Context()
	s := persistence.NewMemory()
	fresh := func(data ...string) ([]persistence.Record, [][]byte) {
		recs := make([]persistence.Record, len(data))
		bufs := make([][]byte, len(data))
		for i, d := range data {
			bufs[i] = []byte(d)
			recs[i] = persistence.Record{Kind: persistence.KindMessage, Data: bufs[i]}
		}
		return recs, bufs
	}
	scribble := func(bufs [][]byte) {
		for _, b := range bufs {
			for i := range b {
				b[i] = '!'
			}
		}
	}
	var want []string
	check := func(what string) {
		t.Helper()
		_, recs, err := s.Load(ctx, "s1")
		if err != nil {
			t.Fatalf("%s: Load: %v", what, err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Data))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}

	recs, bufs := fresh(`{"a":1}`, `{"a":2}`, `{"a":3}`)
	if _, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: "s1"}, recs...); err != nil {
		t.Fatal(err)
	}
	scribble(bufs)
	want = append(want, `{"a":1}`, `{"a":2}`, `{"a":3}`)
	check("after CreateWith")

	recs, bufs = fresh(`"b1"`, `"b2"`)
	if err := s.Append(ctx, "s1", recs...); err != nil {
		t.Fatal(err)
	}
	scribble(bufs)
	want = append(want, `"b1"`, `"b2"`)
	check("after Append")

	// More records than a call gathers without allocating.
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprint(i))
	}
	recs, bufs = fresh(many...)
	if _, err := s.AppendAt(ctx, "s1", 5, recs...); err != nil {
		t.Fatal(err)
	}
	scribble(bufs)
	want = append(want, many...)
	check("after AppendAt")

	// Loaded data is the caller's: writing into it or appending to it
	// changes neither the store nor another record of the same Load nor
	// what another Load returned.
	_, first, err := s.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	_, second, err := s.LoadFrom(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		_ = append(first[i].Data, "XXXXXXXX"...)
		_ = append(second[i].Data, "YYYYYYYY"...)
	}
	for i := range first {
		if string(first[i].Data) != want[i] || string(second[i].Data) != want[i] {
			t.Fatalf("record %d after appending to loaded data: Load %q, LoadFrom %q, want %q", i, first[i].Data, second[i].Data, want[i])
		}
	}
	scribble([][]byte{first[0].Data, first[1].Data})
	if string(second[0].Data) != want[0] || string(second[1].Data) != want[1] {
		t.Fatalf("writing into one Load's data changed another's: %q %q", second[0].Data, second[1].Data)
	}
	for i := range second {
		second[i].Data[0] = '#'
	}
	check("after writing into loaded data")

	// Compact copies the summary and keeps the survivors intact; a reader
	// that loaded before it still has what it read.
	_, held, err := s.LoadFrom(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	summary := []byte(`"summary"`)
	if err := s.Compact(ctx, "s1", 4, persistence.Record{Kind: persistence.KindMessage, Data: summary}); err != nil {
		t.Fatal(err)
	}
	scribble([][]byte{summary})
	want = append([]string{`"summary"`}, want[4:]...)
	check("after Compact")
	if len(held) != 25 || string(held[0].Data) != `{"a":1}` || string(held[4].Data) != `"b2"` {
		t.Fatalf("entries loaded before Compact changed: %v", held[:5])
	}
}

// TestMemoryConcurrentReadersAndWriters has readers load a log while
// writers append to it and compact it, and scribble over what they read.
// Run it with -race: LoadFrom reads stored entries without the lock.
func TestMemoryConcurrentReadersAndWriters(t *testing.T) {
	ctx := t.Context()
	s := persistence.NewMemory()
	if err := s.Create(ctx, subagent.SessionHeader{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	const writers, readers, each = 4, 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers+1)
	for w := range writers {
		wg.Go(func() {
			buf := []byte(`{"w":0,"i":0}`)
			for i := range each {
				buf = fmt.Appendf(buf[:0], `{"w":%d,"i":%d}`, w, i)
				rec := persistence.Record{Kind: persistence.KindMessage, Data: buf}
				if err := s.Append(ctx, "s1", rec, persistence.Record{Kind: "log", Data: buf}); err != nil {
					errs <- err
					return
				}
				for j := range buf {
					buf[j] = 'x'
				}
			}
		})
	}
	wg.Go(func() {
		for range each {
			_, entries, err := s.LoadFrom(ctx, "s1", 0)
			if err != nil {
				errs <- err
				return
			}
			upTo := uint64(0)
			for _, e := range entries {
				if e.Kind == persistence.KindMessage {
					upTo = e.Seq
				}
			}
			if upTo == 0 {
				continue
			}
			if err := s.Compact(ctx, "s1", upTo, persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(`"sum"`)}); err != nil {
				errs <- err
				return
			}
		}
	})
	for range readers {
		wg.Go(func() {
			for range each {
				_, entries, err := s.LoadFrom(ctx, "s1", 0)
				if err != nil {
					errs <- err
					return
				}
				last := uint64(0)
				for _, e := range entries {
					if e.Seq <= last || !json.Valid(e.Data) {
						errs <- fmt.Errorf("bad entry after %d: %d %q", last, e.Seq, e.Data)
						return
					}
					last = e.Seq
					for j := range e.Data {
						e.Data[j] = 'x'
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, entries, err := s.LoadFrom(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	for _, e := range entries {
		if e.Kind == "log" {
			logs++
			if !json.Valid(e.Data) || e.Data[0] != '{' {
				t.Fatalf("stored log record %d changed: %q", e.Seq, e.Data)
			}
		}
	}
	if logs != writers*each {
		t.Fatalf("got %d log records, want %d", logs, writers*each)
	}
}

// TestMemoryLoadAllocations pins that a Load copies a log in two
// allocations, the records and one for all their data, however long the
// log is.
func TestMemoryLoadAllocations(t *testing.T) {
	ctx := context.Background()
	s := persistence.NewMemory()
	if _, err := s.CreateWith(ctx, subagent.SessionHeader{SessionID: "s1"}, benchRecords(10)...); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.Load(ctx, "s1") }); n > 2 {
		t.Errorf("Load of 10 records: %v allocations, want at most 2", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.LoadFrom(ctx, "s1", 0) }); n > 2 {
		t.Errorf("LoadFrom of 10 records: %v allocations, want at most 2", n)
	}
}
