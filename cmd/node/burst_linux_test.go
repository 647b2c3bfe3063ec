package main

// Contract K2: a burst of starts is bounded and every start ends. A test
// peer (testpeer_test.go) is a member that sends raw remoting batches, or
// one that never answers a start; it says what it got on stdout, one line
// each.

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/clusterwire"
	"github.com/subactor/subactor/internal/testkit"
)

// startPeer starts a test peer.
func startPeer(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{stderr: new(testkit.Buffer)}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), envTestPeer+"="+strings.Join(args, " "))
	p.cmd.Stderr = p.stderr
	p.lines = startLines(t, p.cmd)
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p
}

// Contract K2: 50 starts in one batch from one peer: the host admits its
// capacity's worth and refuses the rest at once ("full"); each admitted
// run's caller gets its result, and once disposed no agent is left.
func TestK2_FiftyStartsInOneBatchAreAdmittedUpToCapacityTheRestRefusedAtOnce(t *testing.T) {
	const capacity, burst = 4, 50
	a, b := newMember(t), newMember(t)
	nodeB, _ := serve(t, b, static(a, b), "-capacity", strconv.Itoa(capacity))
	peer := startPeer(t, "burst", a.listen, a.membership, b.membership, b.listen)
	var accepted, refused, results, quiesced int
	for accepted+refused < burst || quiesced < accepted {
		f := strings.Fields(peer.line(t, regexp.MustCompile(`^`), fmt.Sprintf("answers to the burst (%d accepted, %d refused, %d results, %d quiesced)", accepted, refused, results, quiesced)))
		switch f[0] {
		case "accepted":
			accepted++
		case "refused":
			if f[2] != clusterwire.RefusedFull {
				t.Fatalf("start %s refused %q, want full", f[1], f[2])
			}
			// At once: an answer to the batch, not to a run ending.
			if ms, _ := strconv.Atoi(f[3]); time.Duration(ms)*time.Millisecond > testkit.Scale(time.Second) {
				t.Fatalf("start %s refused %d ms after the batch", f[1], ms)
			}
			refused++
		case "settled":
			if f[2] != "completed" || !strings.Contains(strings.Join(f[3:], " "), "echo: hello "+f[1]) {
				t.Fatalf("run %s settled %q", f[1], f[2:])
			}
			results++
		case "quiesced":
			quiesced++
		}
	}
	if accepted != capacity || refused != burst-capacity || results != accepted {
		t.Fatalf("%d accepted, %d refused, %d results: want %d, %d and one per accepted run", accepted, refused, results, capacity, burst-capacity)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agents to end once the runs were disposed")
}

// Contract K2: the start handshake has a deadline: a member that answers
// load queries but never a start has the caller give that start up
// within the loss bound (6 s with a static list) and try again, and the
// caller still ends within two seconds of SIGTERM.
func TestK2_AStartItsHostNeverAnswersIsGivenUpWithinTheLossBound(t *testing.T) {
	a, silent := newMember(t), newMember(t)
	peer := startPeer(t, "silent", silent.listen, silent.membership)
	peer.line(t, regexp.MustCompile(`^ready$`), "the silent member to serve")
	caller := startNode(t, delegateArgs(a, static(a, silent), "hello")...)
	start := regexp.MustCompile(`^start$`)
	peer.line(t, start, "the silent member to get the start")
	first := time.Now()
	peer.line(t, start, "the start to be given up and tried again")
	if gap, bound := time.Since(first), testkit.Scale(6*time.Second+time.Second); gap > bound {
		t.Fatalf("the start was tried again %s after the first, past the loss bound and a second %s", gap, bound)
	}
	terminate(t, caller)
	if code := caller.cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("delegate exit %d, stderr %s", code, caller.stderr.String())
	}
}
