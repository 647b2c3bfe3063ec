package cluster_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Contracts K1, P4: a node advertises, with each provider it offers, that
// provider's capabilities, and membership shows them on its member.
func TestK1_P4_NodeAdvertisesProviderCapabilities(t *testing.T) {
	caps := subagent.Capabilities{Persona: true, OutputSchema: true}
	n := clustertest.Node(t, cluster.Config{}, clustertest.Capable{Caps: caps})
	ms, err := n.WaitMembers(testkit.Ctx(t), func(ms []cluster.Member) bool { return len(ms) == 1 })
	if err != nil || !ms[0].Offers("echo") || ms[0].Capabilities["echo"] != caps {
		t.Fatalf("members %+v, %v", ms, err)
	}
}

// Contract K3: a member's advertisement (its kinds and its gossiped
// state) is untrusted: capabilities of a provider it does not offer, a
// duplicate, a bad or oversized name, too many providers and a negative
// load are each refused with a typed error; a good one reads back what
// was advertised.
func TestK3_MemberAdvertisementIsValidated(t *testing.T) {
	all := subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	allOf := func(name string) *messages.ProviderOffer {
		return &messages.ProviderOffer{Name: name, OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	}
	provs, caps, err := cluster.ParseAdvertisement([]string{"other-kind", "subactor.provider:a", "subactor.provider:b"},
		&messages.MemberState{Capacity: 2, Providers: []*messages.ProviderOffer{allOf("a")}})
	if err != nil || strings.Join(provs, ",") != "a,b" || caps["a"] != all || caps["b"] != (subagent.Capabilities{}) {
		t.Fatalf("parsed %v %v %v", provs, caps, err)
	}
	many := []string{}
	for i := range 65 {
		many = append(many, "subactor.provider:p"+strings.Repeat("x", i))
	}
	a := []string{"subactor.provider:a"}
	for name, c := range map[string]struct {
		kinds []string
		state *messages.MemberState
	}{
		"not offered":        {a, &messages.MemberState{Providers: []*messages.ProviderOffer{allOf("b")}}},
		"capabilities twice": {a, &messages.MemberState{Providers: []*messages.ProviderOffer{allOf("a"), {Name: "a"}}}},
		"provider twice":     {[]string{"subactor.provider:a", "subactor.provider:a"}, &messages.MemberState{}},
		"empty name":         {[]string{"subactor.provider:"}, &messages.MemberState{}},
		"control character":  {[]string{"subactor.provider:a\nb"}, &messages.MemberState{}},
		"mark character":     {[]string{"subactor.provider:a#caps=persona"}, &messages.MemberState{}},
		"slash character":    {[]string{"subactor.provider:a/b"}, &messages.MemberState{}},
		"long name":          {[]string{"subactor.provider:" + strings.Repeat("n", 129)}, &messages.MemberState{}},
		"too many providers": {many, &messages.MemberState{}},
		"negative capacity":  {a, &messages.MemberState{Capacity: -1}},
		"negative runs":      {a, &messages.MemberState{Capacity: 1, Runs: -3}},
	} {
		_, _, err := cluster.ParseAdvertisement(c.kinds, c.state)
		var ae *cluster.AdvertisementError
		if !errors.As(err, &ae) || ae.Reason == "" {
			t.Errorf("%s: %v, want an advertisement error", name, err)
		}
	}
}

// Contracts K3, S4: the host refuses a start using a feature its
// provider does not declare (unsupported), before any provider code runs,
// never dropping the feature silently.
func TestK3_S4_HostRefusesAnUnsupportedRequest(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Capable{Caps: subagent.Capabilities{Persona: true}})
	prompt := []*messages.ContentBlock{{Type: "text", Text: "hi"}}
	persona, depth := "terse", int64(1)
	for _, m := range []*messages.RemoteStart{
		{RunId: "r1", Provider: "echo", Prompt: prompt, OutputSchema: []byte(`{"type":"object"}`)},
		{RunId: "r2", Provider: "echo", Prompt: prompt, MaxDepth: &depth, Persona: &persona},
		{RunId: "r3", Provider: "echo", Prompt: prompt, ToolFilter: &messages.ToolFilter{Allow: []string{"read"}}},
	} {
		r := refusal(t, ask(t, n, m), clusterwire.FailedUnsupported)
		if !strings.Contains(r.GetReason(), "does not support") {
			t.Fatalf("refusal %v", r)
		}
	}
	if load := ask(t, n, &messages.HostStatus{}).(*messages.HostLoad); load.GetRuns() != 0 {
		t.Fatalf("refused starts left %d runs", load.GetRuns())
	}
}
