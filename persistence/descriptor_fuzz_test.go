package persistence_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// FuzzD3_FoldDescriptor feeds arbitrary bytes to FoldDescriptor as a
// stored descriptor (K3: stored payloads are hostile). It must never
// panic; it either fails with one of its documented errors or returns a
// canonical descriptor: one Snapshot leaves as it is, whose record folds
// back to it and re-encodes to the same bytes.
func FuzzD3_FoldDescriptor(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"provider":"spawn"}`,
		`{"version":1,"provider":"acp","agentProvider":"openai","agentModel":"m","persona":"p <&>","toolFilter":{"allow":["a","b"],"deny":["c"]},"providerData":{"version":1,"sessionId":"s"}}`,
		` { "version" : 1 , "provider" : "spawn" , "providerData" : { "version" : 3 , "x" : [ 1 , "\u003c" ] } } `,
		`{"version":1,"provider":"spawn","toolFilter":{"allow":[],"deny":["x"]}}`,
		`{"version":1,"provider":"\ud800","persona":"\u00e9"}`,
		`{"version":1,"provider":"spawn","agentModel":""}`,
		`{"version":2,"anything":true}`,
		`{"version":1,"provider":"spawn","subagentDepth":1}`,
		`{"version":1,"provider":"spawn","provider":"acp"}`,
		`{"version":1,"provider":"spawn"} {}`,
		`{"version":1,"provider":null}`,
		`{"version":1e0,"provider":"spawn"}`,
		`{"version":1,"provider":"spawn","toolFilter":{"allow":["a","a"]}}`,
		`{"version":1,"provider":"acp","providerData":{"version":0}}`,
		`[1,2,3]`,
		`{}`,
		``,
		"\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		d, err := persistence.FoldDescriptor([]persistence.Record{{Kind: persistence.DescriptorKind, Data: data}})
		if !bytes.Equal(data, orig) {
			t.Fatalf("FoldDescriptor changed its input")
		}
		if err != nil {
			var de *persistence.DescriptorError
			var ue *persistence.UnsupportedVersionError
			switch {
			case errors.As(err, &de) && errors.Is(err, persistence.ErrMalformedDescriptor):
			case errors.As(err, &ue) && errors.Is(err, subagent.ErrNotResumable) && ue.Version != persistence.DescriptorVersion:
			default:
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		if d.Version != persistence.DescriptorVersion {
			t.Fatalf("folded version %d", d.Version)
		}
		snap, err := persistence.SnapshotDescriptor(d)
		if err != nil {
			t.Fatalf("Snapshot refuses what Fold accepted: %v (%+v)", err, d)
		}
		if !reflect.DeepEqual(snap, d) {
			t.Fatalf("folded descriptor is not canonical: snapshot %+v, fold %+v", snap, d)
		}
		rec, err := d.Record()
		if err != nil {
			t.Fatalf("Record of a folded descriptor: %v", err)
		}
		back, err := persistence.FoldDescriptor([]persistence.Record{rec})
		if err != nil {
			t.Fatalf("folding the re-encoded descriptor %s: %v", rec.Data, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Fatalf("round trip through %s: got %+v, want %+v", rec.Data, back, d)
		}
		again, err := back.Record()
		if err != nil || !bytes.Equal(again.Data, rec.Data) {
			t.Fatalf("re-encoding is not stable: %s then %s (%v)", rec.Data, again.Data, err)
		}
	})
}
