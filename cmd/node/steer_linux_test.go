package main

// Steer across nodes (K1, P4, R4): `node delegate -cluster -steer` on
// node A steers a child that `node serve -offer-model` hosts on node B,
// its model a scripted OpenAI endpoint. One node per OS process, as in
// cluster_linux_test.go.

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/subactor/subactor/internal/testkit/openaitest"
)

// Contracts K1, P4, R4: a parent on node A starts a child on node B's
// model (serve -offer-model) and steers it while the child's first model
// request is in flight: the steer is admitted (A says so, and the child's
// steer progress reaches A), the child's next model request carries the
// message (no earlier one does), the child's answer comes back to A as
// its result, and once A disposed the run B hosts nothing and its model
// is asked nothing more.
func TestK1_P4_R4_SteerReachesAModelChildOnAnotherNode(t *testing.T) {
	const steer = "STEER: wrap up now"
	carries := func(r openaitest.Request) bool {
		return slices.ContainsFunc(r.Messages, func(m openaitest.Message) bool { return m.Role == "user" && m.Text() == steer })
	}
	var calls atomic.Int64
	// A request without the steer answers a tool call (the child has no
	// tools: an error result, and its loop goes on), held until the steer
	// was sent; the one carrying it answers the result.
	srv := openaitest.NewResponder(t, func(r openaitest.Request) openaitest.Step {
		if carries(r) {
			return openaitest.Reply("steered and done")
		}
		step := openaitest.Calls(openaitest.ToolCall{ID: fmt.Sprintf("call_%d", calls.Add(1)), Name: "look", Args: `{}`})
		step.Hold = true
		return step
	})
	a, b, c := newMember(t), newMember(t), newMember(t)
	how := static(a, b, c)
	env := []string{envBaseURL + "=" + srv.URL, envAPIKey + "=sk", envModel + "=m"}
	nodeB := startNodeWith(t, env, false, append([]string{"serve", "-offer-model", "model"}, how(b)...)...)
	if l := nodeB.line(t, memberLine, "serve to join"); !strings.HasSuffix(l, "offering [model], capacity 4") {
		t.Fatalf("serve says %q, want it offering model", l)
	}

	args := append([]string{"delegate", "-cluster", "-provider", "model", "-steer", "-json"}, how(a)...)
	caller := startNodeWith(t, nil, true, append(args, "look around")...)
	caller.line(t, startEvent, "the child's start")
	srv.WaitInFlight(t, 1) // the child's first request, held
	if _, err := io.WriteString(caller.stdin, steer+"\n"); err != nil {
		t.Fatal(err)
	}
	srv.Release()
	admitted := caller.line(t, regexp.MustCompile(`"kind":"steer-admitted"`), "the child's steer progress")
	if !strings.Contains(admitted, steer) {
		t.Fatalf("steer progress %s", admitted)
	}
	caller.stdin.Close()
	code := caller.rest(t)
	last := caller.all[len(caller.all)-1]
	if code != 0 || !strings.Contains(last, `"type":"node/result"`) || !strings.Contains(last, `"stopReason":"completed"`) || !strings.Contains(last, "steered and done") {
		t.Fatalf("delegate exit %d, last line %s, stderr %s", code, last, caller.stderr.String())
	}
	if !strings.Contains(caller.stderr.String(), "delegate: steer admitted: "+steer) {
		t.Fatalf("delegate did not confirm the steer; stderr %s", caller.stderr.String())
	}
	reqs := srv.Requests()
	if !carries(reqs[len(reqs)-1]) || slices.ContainsFunc(reqs[:len(reqs)-1], carries) {
		t.Fatalf("the steer is not in the child's request after its admission alone: %d requests", len(reqs))
	}

	status := startNode(t, append([]string{"status"}, how(c)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	if !slices.ContainsFunc(status.all, func(l string) bool { return strings.HasSuffix(l, b.listen+" providers=[model] capacity=4 runs=0") }) {
		t.Fatalf("status after the dispose printed %q, want B hosting no run", status.all)
	}
	if got := len(srv.Requests()); got != len(reqs) {
		t.Fatalf("the disposed child made %d more model requests", got-len(reqs))
	}
}
