package descriptor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// msg is a model-visible record.
func msg(data string) persistence.Record {
	return persistence.Record{Kind: persistence.KindMessage, Data: json.RawMessage(data)}
}

// fullDescriptor sets every field, so that a round trip that drops one
// shows up.
func fullDescriptor() descriptor.Descriptor {
	persona := "You review Go code & nothing else."
	return descriptor.Descriptor{
		Provider:      "acp",
		AgentProvider: "openai",
		AgentModel:    "gpt-4o-mini",
		Persona:       &persona,
		ToolFilter:    &subagent.ToolFilter{Allow: []string{"read_file", "grep"}, Deny: []string{"bash"}},
		ProviderData:  json.RawMessage(`{"version":2,"sessionId":"remote-7"}`),
	}
}

func descRecord(data string) persistence.Record {
	return persistence.Record{Kind: descriptor.Kind, Data: json.RawMessage(data)}
}

// wantMalformed fails unless err is a *DescriptorError matching
// ErrMalformed (and not ErrNotResumable: a malformed payload
// is a fault, not an old child).
func wantMalformed(t *testing.T, err error) *descriptor.DescriptorError {
	t.Helper()
	var de *descriptor.DescriptorError
	if !errors.As(err, &de) || !errors.Is(err, descriptor.ErrMalformed) {
		t.Fatalf("got %v, want a *DescriptorError wrapping ErrMalformed", err)
	}
	if errors.Is(err, subagent.ErrNotResumable) {
		t.Fatalf("malformed descriptor matches ErrNotResumable: %v", err)
	}
	return de
}

func wantUnsupported(t *testing.T, err error, version int) {
	t.Helper()
	var ue *descriptor.UnsupportedVersionError
	if !errors.As(err, &ue) || !errors.Is(err, subagent.ErrNotResumable) {
		t.Fatalf("got %v, want an *UnsupportedVersionError wrapping subagent.ErrNotResumable", err)
	}
	if ue.Version != version {
		t.Fatalf("UnsupportedVersionError.Version = %d, want %d", ue.Version, version)
	}
	if errors.Is(err, descriptor.ErrMalformed) {
		t.Fatalf("unsupported version matches ErrMalformed: %v", err)
	}
}

func TestD1_DescriptorRecordsExplicitFieldsOnly(t *testing.T) {
	want := fullDescriptor()
	want.Version = descriptor.Version

	snap, err := descriptor.Snapshot(fullDescriptor())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("snapshot: got %+v, want %+v", snap, want)
	}
	rec, err := snap.Record()
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if rec.Kind != descriptor.Kind {
		t.Fatalf("record kind %q, want %q", rec.Kind, descriptor.Kind)
	}
	got, err := descriptor.Fold([]persistence.Record{msg(`"hi"`), rec})
	if err != nil {
		t.Fatalf("Fold: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: got %+v, want %+v", got, want)
	}

	// The payload has exactly the documented keys: no depth, no output
	// schema, no options bag.
	documented := []string{"agentModel", "agentProvider", "persona", "provider", "providerData", "toolFilter", "version"}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(rec.Data, &obj); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range obj {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, documented) {
		t.Fatalf("record keys %v, want %v", keys, documented)
	}
	// And the type cannot grow one without this test noticing.
	var tags []string
	typ := reflect.TypeFor[descriptor.Descriptor]()
	for i := range typ.NumField() {
		tags = append(tags, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	slices.Sort(tags)
	if !slices.Equal(tags, documented) {
		t.Fatalf("Descriptor JSON fields %v, want %v", tags, documented)
	}

	// Optional fields are left out, not written empty.
	minimal, err := descriptor.Descriptor{Provider: "spawn"}.Record()
	if err != nil {
		t.Fatal(err)
	}
	if string(minimal.Data) != `{"version":1,"provider":"spawn"}` {
		t.Fatalf("minimal record %s", minimal.Data)
	}
}

// Contract D2: snapshot validates and deep-copies.
func TestD2_SnapshotValidatesAndDeepCopies(t *testing.T) {
	in := fullDescriptor()
	in.ProviderData = json.RawMessage(`{ "version": 2, "sessionId": "remote-7" }`)
	snap, err := descriptor.Snapshot(in)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	want := fullDescriptor()
	want.Version = descriptor.Version // provider data compacted too

	// The caller changes everything it still holds.
	*in.Persona = "something else"
	in.ToolFilter.Allow[0] = "bash"
	in.ToolFilter.Deny[0] = "read_file"
	in.ToolFilter.Allow = append(in.ToolFilter.Allow[:1], "write_file")
	copy(in.ProviderData, `[[[[[[[[[[`)
	in.Provider = "spawn"
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("snapshot changed with its input: got %+v, want %+v", snap, want)
	}
	// And the other way: changing the snapshot leaves a second one alone.
	again, err := descriptor.Snapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	*again.Persona = "x"
	again.ToolFilter.Allow[0] = "y"
	again.ProviderData[0] = '['
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("snapshot of a snapshot shares memory with it")
	}

	blank, empty := "  \n\t", ""
	for _, c := range []struct {
		name  string
		edit  func(*descriptor.Descriptor)
		fault error // a subagent tool filter sentinel, when one applies
	}{
		{"empty provider", func(d *descriptor.Descriptor) { d.Provider = "" }, nil},
		{"provider not UTF-8", func(d *descriptor.Descriptor) { d.Provider = "a\xffb" }, nil},
		{"model not UTF-8", func(d *descriptor.Descriptor) { d.AgentModel = "\xc3" }, nil},
		{"empty persona", func(d *descriptor.Descriptor) { d.Persona = &empty }, nil},
		{"blank persona", func(d *descriptor.Descriptor) { d.Persona = &blank }, nil},
		{"filter with no names", func(d *descriptor.Descriptor) { d.ToolFilter = &subagent.ToolFilter{} }, descriptor.ErrFilterEmpty},
		{"filter with empty lists", func(d *descriptor.Descriptor) {
			d.ToolFilter = &subagent.ToolFilter{Allow: []string{}, Deny: []string{}}
		}, descriptor.ErrFilterEmpty},
		{"filter with an empty name", func(d *descriptor.Descriptor) {
			d.ToolFilter = &subagent.ToolFilter{Allow: []string{"a", ""}}
		}, descriptor.ErrFilterBlankName},
		{"filter with a duplicate", func(d *descriptor.Descriptor) {
			d.ToolFilter = &subagent.ToolFilter{Allow: []string{"a", "b", "a"}}
		}, descriptor.ErrFilterDuplicate},
		{"filter allowing and denying one tool", func(d *descriptor.Descriptor) {
			d.ToolFilter = &subagent.ToolFilter{Allow: []string{"a"}, Deny: []string{"a"}}
		}, descriptor.ErrFilterDuplicate},
		{"provider data not JSON", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":`) }, nil},
		{"provider data null", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`null`) }, nil},
		{"provider data an array", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`[1]`) }, nil},
		{"provider data without version", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"id":"x"}`) }, nil},
		{"provider data version 0", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":0}`) }, nil},
		{"provider data version -1", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":-1}`) }, nil},
		{"provider data version 1.5", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":1.5}`) }, nil},
		{"provider data version a string", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":"1"}`) }, nil},
		{"provider data version null", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":null}`) }, nil},
		{"provider data repeated key", func(d *descriptor.Descriptor) {
			d.ProviderData = json.RawMessage(`{"version":1,"version":2}`)
		}, nil},
		{"provider data trailing", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage(`{"version":1} {}`) }, nil},
		{"provider data not UTF-8", func(d *descriptor.Descriptor) { d.ProviderData = json.RawMessage("{\"version\":1,\"x\":\"\xff\"}") }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := fullDescriptor()
			c.edit(&d)
			_, err := descriptor.Snapshot(d)
			wantMalformed(t, err)
			if c.fault != nil && !errors.Is(err, c.fault) {
				t.Fatalf("got %v, want it to match %v", err, c.fault)
			}
			// Record refuses what Snapshot refuses.
			if _, err := d.Record(); !errors.Is(err, descriptor.ErrMalformed) {
				t.Fatalf("Record: got %v, want ErrMalformed", err)
			}
		})
	}

	// Snapshot writes the current version; it will not relabel another.
	d := fullDescriptor()
	d.Version = 2
	_, err = descriptor.Snapshot(d)
	wantUnsupported(t, err, 2)
}

func TestD3_FoldRejectsMalformedAndUnknownKeys(t *testing.T) {
	for _, c := range []struct{ name, data string }{
		{"not JSON", `{"version":1,"provider":`},
		{"garbage", `spawn`},
		{"array", `[{"version":1,"provider":"spawn"}]`},
		{"string", `"spawn"`},
		{"null", `null`},
		{"unknown key", `{"version":1,"provider":"spawn","subagentDepth":2}`},
		{"output schema", `{"version":1,"provider":"spawn","outputSchema":{"type":"object"}}`},
		{"options bag", `{"version":1,"provider":"spawn","agentOptions":{"model":"m"}}`},
		{"key in another case", `{"version":1,"Provider":"spawn"}`},
		{"repeated key", `{"version":1,"provider":"spawn","provider":"acp"}`},
		{"trailing data", `{"version":1,"provider":"spawn"} x`},
		{"trailing object", `{"version":1,"provider":"spawn"}{}`},
		{"not UTF-8", "{\"version\":1,\"provider\":\"sp\xffawn\"}"},
		{"no provider", `{"version":1}`},
		{"empty provider", `{"version":1,"provider":""}`},
		{"null provider", `{"version":1,"provider":null}`},
		{"provider a number", `{"version":1,"provider":7}`},
		{"model an object", `{"version":1,"provider":"spawn","agentModel":{}}`},
		{"version a string", `{"version":"1","provider":"spawn"}`},
		{"version a fraction", `{"version":1.5,"provider":"spawn"}`},
		{"version null", `{"version":null,"provider":"spawn"}`},
		{"blank persona", `{"version":1,"provider":"spawn","persona":"   "}`},
		{"persona a list", `{"version":1,"provider":"spawn","persona":["a"]}`},
		{"empty filter", `{"version":1,"provider":"spawn","toolFilter":{}}`},
		{"filter with empty lists", `{"version":1,"provider":"spawn","toolFilter":{"allow":[],"deny":[]}}`},
		{"filter null", `{"version":1,"provider":"spawn","toolFilter":null}`},
		{"filter a list", `{"version":1,"provider":"spawn","toolFilter":["a"]}`},
		{"filter unknown key", `{"version":1,"provider":"spawn","toolFilter":{"allow":["a"],"only":["b"]}}`},
		{"filter key in another case", `{"version":1,"provider":"spawn","toolFilter":{"Allow":["a"]}}`},
		{"filter repeated key", `{"version":1,"provider":"spawn","toolFilter":{"allow":["a"],"allow":["b"]}}`},
		{"filter empty name", `{"version":1,"provider":"spawn","toolFilter":{"allow":[""]}}`},
		{"filter null name", `{"version":1,"provider":"spawn","toolFilter":{"allow":["a",null]}}`},
		{"filter duplicate", `{"version":1,"provider":"spawn","toolFilter":{"allow":["a"],"deny":["a"]}}`},
		{"filter names not strings", `{"version":1,"provider":"spawn","toolFilter":{"allow":[1]}}`},
		{"provider data a string", `{"version":1,"provider":"acp","providerData":"s-1"}`},
		{"provider data null", `{"version":1,"provider":"acp","providerData":null}`},
		{"provider data no version", `{"version":1,"provider":"acp","providerData":{"sessionId":"s-1"}}`},
		{"provider data version 0", `{"version":1,"provider":"acp","providerData":{"version":0}}`},
		{"provider data version text", `{"version":1,"provider":"acp","providerData":{"version":"1"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := []persistence.Record{descRecord(c.data)}
			d, err := descriptor.Fold(recs)
			wantMalformed(t, err)
			if !reflect.DeepEqual(d, descriptor.Descriptor{}) {
				t.Fatalf("failed fold returned %+v", d)
			}
			if string(recs[0].Data) != c.data {
				t.Fatalf("Fold changed its input")
			}
		})
	}

	// The folded value does not alias the record it came from.
	recs := []persistence.Record{descRecord(`{"version":1,"provider":"acp","providerData":{"version":1}}`)}
	d, err := descriptor.Fold(recs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs[0].Data {
		recs[0].Data[i] = ' '
	}
	if string(d.ProviderData) != `{"version":1}` {
		t.Fatalf("folded provider data aliases the record: %q", d.ProviderData)
	}
}

func TestD3_UnsupportedVersionIsNotResumable(t *testing.T) {
	for _, c := range []struct {
		data    string
		version int
	}{
		{`{}`, 0},
		{`{"provider":"spawn"}`, 0},
		{`{"version":0,"provider":"spawn"}`, 0},
		{`{"version":-1,"provider":"spawn"}`, -1},
		{`{"version":2,"provider":"spawn"}`, 2},
		// A later version's keys and shapes are its own business.
		{`{"version":99,"provider":7,"subagentDepth":3,"toolFilter":{"mode":"strict"}}`, 99},
	} {
		t.Run(c.data, func(t *testing.T) {
			_, err := descriptor.Fold([]persistence.Record{descRecord(c.data)})
			wantUnsupported(t, err, c.version)
		})
	}
}

func TestD3_FirstDescriptorIsAuthoritative(t *testing.T) {
	first, err := descriptor.Descriptor{Provider: "spawn", AgentModel: "m1"}.Record()
	if err != nil {
		t.Fatal(err)
	}
	second, err := descriptor.Descriptor{Provider: "acp", AgentModel: "m2"}.Record()
	if err != nil {
		t.Fatal(err)
	}
	want := descriptor.Descriptor{Version: 1, Provider: "spawn", AgentModel: "m1"}
	for _, c := range []struct {
		name string
		recs []persistence.Record
	}{
		{"later valid descriptor", []persistence.Record{msg(`1`), first, msg(`2`), second}},
		// Later descriptors are ignored entirely: one that is malformed
		// or of another version cannot make the child unresumable.
		{"later malformed descriptor", []persistence.Record{first, descRecord(`{"version":1}`), descRecord(`[`)}},
		{"later unsupported descriptor", []persistence.Record{first, descRecord(`{"version":2}`)}},
		// Other kinds that look like descriptors are not descriptors.
		{"earlier look-alike kinds", []persistence.Record{
			{Kind: "descriptor", Data: second.Data}, {Kind: "subagent/descriptor/v2", Data: second.Data}, first,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := descriptor.Fold(c.recs)
			if err != nil {
				t.Fatalf("Fold: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want the first descriptor %+v", got, want)
			}
		})
	}
	// And an earlier bad one is not skipped in favour of a later good one.
	_, err = descriptor.Fold([]persistence.Record{descRecord(`{"version":1}`), first})
	wantMalformed(t, err)
	_, err = descriptor.Fold([]persistence.Record{descRecord(`{"version":3}`), first})
	wantUnsupported(t, err, 3)
}

func TestD3_NoDescriptor(t *testing.T) {
	for name, recs := range map[string][]persistence.Record{
		"nil log":       nil,
		"messages only": {msg(`"a"`), msg(`"b"`)},
		"other kinds":   {{Kind: "descriptor", Data: json.RawMessage(`{"version":1,"provider":"spawn"}`)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := descriptor.Fold(recs)
			if !errors.Is(err, descriptor.ErrMissing) {
				t.Fatalf("got %v, want ErrMissing", err)
			}
			if errors.Is(err, descriptor.ErrMalformed) || errors.Is(err, subagent.ErrNotResumable) {
				t.Fatalf("ErrMissing matches another descriptor error: %v", err)
			}
		})
	}
}

func TestD4_DescriptorIsLogOnlyAndSurvivesCompaction(t *testing.T) {
	if descriptor.Kind == persistence.KindMessage {
		t.Fatalf("descriptor records are %q, the model-visible kind", descriptor.Kind)
	}
	for name, open := range map[string]func(t *testing.T) persistence.Store{
		"memory": func(*testing.T) persistence.Store { return persistence.NewMemory() },
		"bolt": func(t *testing.T) persistence.Store {
			s, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
			if err != nil {
				t.Fatalf("OpenBolt: %v", err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			want, err := descriptor.Snapshot(fullDescriptor())
			if err != nil {
				t.Fatal(err)
			}
			rec, err := want.Record()
			if err != nil {
				t.Fatal(err)
			}
			h := subagent.SessionHeader{SessionID: "child", ParentSessionID: "parent", DelegationDepth: 1}
			last, err := s.CreateWith(t.Context(), h, rec, msg(`{"n":1}`), msg(`{"n":2}`), msg(`{"n":3}`))
			if err != nil {
				t.Fatalf("CreateWith: %v", err)
			}
			if err := s.Compact(t.Context(), "child", last, msg(`{"summary":"n=1..3"}`)); err != nil {
				t.Fatalf("Compact: %v", err)
			}
			_, recs, err := s.Load(t.Context(), "child")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			// Everything model-visible was folded into the summary; the
			// descriptor stayed, first, byte for byte.
			if len(recs) != 2 || recs[0].Kind != descriptor.Kind || string(recs[0].Data) != string(rec.Data) ||
				recs[1].Kind != persistence.KindMessage {
				t.Fatalf("log after Compact: %+v", recs)
			}
			got, err := descriptor.Fold(recs)
			if err != nil {
				t.Fatalf("Fold after Compact: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("descriptor after Compact: got %+v, want %+v", got, want)
			}
		})
	}
}

// ExampleSnapshot shows a provider recording a durable child's
// descriptor before it creates anything, and the record a resume reads.
func ExampleSnapshot() {
	persona := "You review Go code & tests."
	d, err := descriptor.Snapshot(descriptor.Descriptor{
		Provider:      "spawn",
		AgentProvider: "openai",
		AgentModel:    "gpt-4o-mini",
		Persona:       &persona,
		ToolFilter:    &subagent.ToolFilter{Allow: []string{"read_file", "grep"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, err := d.Record()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Kind, rec.Kind != persistence.KindMessage) // log-only
	fmt.Println(string(rec.Data))

	back, err := descriptor.Fold([]persistence.Record{rec})
	fmt.Println(back.Provider, *back.Persona, err)

	_, err = descriptor.Fold([]persistence.Record{{Kind: descriptor.Kind, Data: []byte(`{"version":2}`)}})
	fmt.Println(errors.Is(err, subagent.ErrNotResumable), err)
	// Output:
	// subagent/descriptor true
	// {"version":1,"provider":"spawn","agentProvider":"openai","agentModel":"gpt-4o-mini","persona":"You review Go code & tests.","toolFilter":{"allow":["read_file","grep"]}}
	// spawn You review Go code & tests. <nil>
	// true persistence: descriptor version 2 is not supported (want 1)
}
