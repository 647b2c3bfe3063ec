package remote_test

import (
	"context"
	"errors"
	"testing"

	"github.com/subactor/subactor/actors/providers/remote"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/cluster"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/clustertest"
	"github.com/subactor/subactor/messages"
	"github.com/subactor/subactor/subagent"
)

// Contracts P4, S4: the remote provider declares what the members
// offering it advertise, and places a run only on a member supporting
// every feature it uses: the Service refuses a feature no member has,
// and placement (for a caller that skips the Service) fails with an
// error matching both ErrNoMember and subagent.ErrUnsupported, leaving
// nothing hosted. Several members, one without the feature, are
// cmd/node's TestK1_P4_RemoteChildTakesPersonaAndSchemaFromDelegate.
func TestP4_S4_PlacementSkipsMembersWithoutTheCapability(t *testing.T) {
	n := clustertest.Node(t, cluster.Config{}, clustertest.Capable{Caps: subagent.Capabilities{Persona: true}})
	p, err := remote.New(remote.Config{Name: "echo", Node: n})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitMembers(testkit.Ctx(t), func(ms []cluster.Member) bool { return len(ms) == 1 }); err != nil {
		t.Fatal(err)
	}
	if got := p.Capabilities(); got != (subagent.Capabilities{Persona: true}) {
		t.Fatalf("capabilities %+v, want the member's", got)
	}
	svc := registry.New(n.System())
	t.Cleanup(svc.Close)
	if _, err := svc.RegisterProvider(p); err != nil {
		t.Fatal(err)
	}
	prompt := []subagent.ContentBlock{subagent.Text("hi")}
	if _, err := svc.Start(testkit.Ctx(t), "echo", subagent.StartRequest{Parent: parent{}, Prompt: prompt, OutputSchema: []byte(`{"type":"object"}`)}); !errors.Is(err, subagent.ErrUnsupported) {
		t.Fatalf("Service start with an output schema: %v, want ErrUnsupported", err)
	}
	_, err = p.Start(testkit.Ctx(t), subagent.Scope{}, subagent.StartRequest{Parent: parent{}, Prompt: prompt, ToolFilter: &subagent.ToolFilter{Allow: []string{"read"}}})
	if !errors.Is(err, subagent.ErrUnsupported) || !errors.Is(err, remote.ErrNoMember) {
		t.Fatalf("placing a run with a tool filter: %v, want ErrUnsupported and ErrNoMember", err)
	}
	persona := "terse"
	r, err := svc.Start(testkit.Ctx(t), "echo", subagent.StartRequest{Parent: parent{}, Prompt: prompt, Persona: &persona})
	if err != nil {
		t.Fatalf("a persona the member supports: %v", err)
	}
	if _, err := r.Wait(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := r.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	awaitUnhosted(t, n, func(l *messages.HostLoad) bool { return l.GetRuns() != 0 })
}
