package descriptor_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// FuzzD3_FoldDescriptor feeds arbitrary bytes to Fold as a
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
		d, err := descriptor.Fold([]persistence.Record{{Kind: descriptor.Kind, Data: data}})
		if !bytes.Equal(data, orig) {
			t.Fatalf("Fold changed its input")
		}
		if err != nil {
			var de *descriptor.DescriptorError
			var ue *descriptor.UnsupportedVersionError
			switch {
			case errors.As(err, &de) && errors.Is(err, descriptor.ErrMalformed):
			case errors.As(err, &ue) && errors.Is(err, subagent.ErrNotResumable) && ue.Version != descriptor.Version:
			default:
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		if d.Version != descriptor.Version {
			t.Fatalf("folded version %d", d.Version)
		}
		snap, err := descriptor.Snapshot(d)
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
		back, err := descriptor.Fold([]persistence.Record{rec})
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
