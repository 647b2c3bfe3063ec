package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/subactor/subactor/model/scripted"
	"github.com/subactor/subactor/subagent"
)

// Contracts K1, P4, S4 (issue 28 item 4): a remote child takes the
// start-time features delegate -cluster gives it. Member B offers
// "model" as an ACP agent server (no features), member C offers its
// model under the same name (every feature), and status -json shows
// each member's. With B alone a persona is refused as unsupported,
// never dropped; with both, a run with a persona and an output schema is
// placed on C (B skipped) and answers under the schema, and a schema the
// child's answer cannot satisfy fails the run: the schema reached it.
func TestK1_P4_RemoteChildTakesPersonaAndSchemaFromDelegate(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	root := writeTree(t)
	acpConfig := writeConfig(t, `{"agent_servers": {"model": `+fakeServer(t)+`}}`)
	nodeB := startNode(t, append([]string{"serve", "-config", acpConfig}, how(b)...)...)
	nodeB.line(t, memberLine, "B to join")
	delegate := func(args ...string) *process {
		return startNode(t, append(append([]string{"delegate", "-cluster", "-provider", "model", "-json"}, how(a)...), args...)...)
	}

	refused := delegate("-persona", "terse", "tally .")
	if code := refused.rest(t); code == 0 || !strings.Contains(refused.stderr.String(), "does not support persona") {
		t.Fatalf("a persona with only B offering model: exit %d, stderr %s", code, refused.stderr.String())
	}

	nodeC := startNode(t, append([]string{"serve", "-offer-model", "model", "-dir", root}, how(c)...)...)
	idC := memberLine.FindStringSubmatch(nodeC.line(t, memberLine, "C to join"))[1]

	status := startNode(t, append([]string{"status", "-json"}, how(a)...)...)
	if code := status.rest(t); code != 0 || len(status.all) != 2 {
		t.Fatalf("status -json exit %d, stdout %q, stderr %s", code, status.all, status.stderr.String())
	}
	all := subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	for _, l := range status.all {
		var m jsonMember
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("status -json line %q: %v", l, err)
		}
		want := subagent.Capabilities{}
		if m.ID == idC {
			want = all
		}
		if got, ok := m.Capabilities["model"]; !ok || got != want {
			t.Fatalf("status -json line %q: capabilities of model %+v, want %+v", l, got, want)
		}
	}

	hosted := regexp.MustCompile(`"kind":"remote-hosted-by","text":"` + regexp.QuoteMeta(idC) + `"`)
	for i := range 2 { // B would take some of them were it not skipped
		caller := delegate("-persona", "a terse counter", "-output-schema", string(scripted.TallySchema), "-max-depth", "1", "tally .")
		if code := caller.rest(t); code != 0 {
			t.Fatalf("delegate %d with a persona and a schema: exit %d, stdout %q, stderr %s", i, code, caller.all, caller.stderr.String())
		}
		if !hosted.MatchString(strings.Join(caller.all, "\n")) {
			t.Fatalf("delegate %d: not hosted by C (%s): %q", i, idC, caller.all)
		}
		var tally struct{ Path string }
		if answer := jsonField(t, caller.all, "node/result", "answer"); json.Unmarshal([]byte(answer), &tally) != nil || tally.Path == "" {
			t.Fatalf("delegate %d answered %q, want a tally under the schema", i, answer)
		}
	}

	unmet := delegate("-output-schema", `{"type":"array"}`, "tally .")
	if code := unmet.rest(t); code == 0 {
		t.Fatalf("a schema the answer cannot meet: exit 0, stdout %q", unmet.all)
	}
}

// Contract S4: delegate's start-time features shape a child on a
// cluster member; without -cluster they are a usage error, exit 2.
func TestK1_DelegateFeaturesNeedCluster(t *testing.T) {
	config := writeConfig(t, `{"agent_servers": {"fake": `+fakeServer(t)+`}}`)
	for _, f := range [][]string{{"-persona", "p"}, {"-output-schema", "{}"}, {"-allow-tools", "read"}, {"-deny-tools", "x"}, {"-max-depth", "1"}} {
		_, stderr, code := node(t, t.TempDir(), append(append([]string{"delegate", "-config", config}, f...), "hi")...)
		if code != exitUsage || !strings.Contains(stderr, "give -cluster too") {
			t.Errorf("delegate %v without -cluster: exit %d, stderr %q", f, code, stderr)
		}
	}
}
