package cluster_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/messages"
)

// Contract K3: whatever bytes a peer sends as a start request, decoding
// and validation never panic, and an accepted request stays within the
// node's bounds.
func FuzzRemoteStart(f *testing.F) {
	depth := int64(2)
	persona := "p"
	for _, m := range []*messages.RemoteStart{
		{RunId: "r", Provider: "echo", Prompt: []*messages.ContentBlock{{Type: "text", Text: "hello"}}},
		{RunId: "r", Provider: "echo", Prompt: []*messages.ContentBlock{{Text: strings.Repeat("x", 100)}},
			Options: &messages.AgentOptions{MaxDepth: &depth}, MaxDepth: &depth, Persona: &persona,
			ToolFilter: &messages.ToolFilter{Allow: []string{"a"}}, ParentDepth: -1},
		{},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}) // a length past the end
	const maxPrompt = 64
	f.Fuzz(func(t *testing.T, data []byte) {
		var m messages.RemoteStart
		if err := proto.Unmarshal(data, &m); err != nil {
			return
		}
		req, err := cluster.ValidateStart(&m, maxPrompt)
		if err != nil {
			return
		}
		size := 0
		for _, b := range req.Prompt {
			size += len(b.Text)
		}
		if size > maxPrompt || m.GetRunId() == "" || len(req.Prompt) == 0 || req.Parent.Header().DelegationDepth < 0 {
			t.Fatalf("accepted %v as %+v", &m, req)
		}
	})
}

// Contract K3: whatever kinds and gossiped state a member advertises,
// reading them never panics, and what is accepted is bounded and names
// only offered providers.
func FuzzMemberAdvertisement(f *testing.F) {
	state := func(m *messages.MemberState) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add("subactor.provider:a", state(&messages.MemberState{Capacity: 1, Providers: []*messages.ProviderOffer{{Name: "a", Persona: true}}}))
	f.Add("subactor.provider:a\x00subactor.provider:b", state(&messages.MemberState{Providers: []*messages.ProviderOffer{{Name: "c"}}}))
	f.Add("other\x00subactor.provider:", state(&messages.MemberState{Runs: -1}))
	f.Add("subactor.provider:a\x00subactor.provider:a", []byte{0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, joined string, data []byte) {
		var st messages.MemberState
		if err := proto.Unmarshal(data, &st); err != nil {
			return
		}
		provs, caps, err := cluster.ParseAdvertisement(strings.Split(joined, "\x00"), &st)
		if err != nil {
			return
		}
		if len(provs) > 64 || len(caps) != len(provs) || st.GetCapacity() < 0 || st.GetRuns() < 0 {
			t.Fatalf("accepted %q %v as %v %v", joined, &st, provs, caps)
		}
		for _, p := range provs {
			if _, ok := caps[p]; !ok || p == "" || len(p) > 128 || strings.Contains(p, "#") {
				t.Fatalf("accepted %q %v as %v %v", joined, &st, provs, caps)
			}
		}
	})
}
