package main

// Failover of continuable children (K2, S8; issue 28): members serving
// the node's model share one PostgreSQL database, so a continuable child
// whose node died is continued on another by its next follow-up, from
// the shared log; the caller is an embedder's process (the continuable
// test peer, continuablepeer_test.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/internal/testkit/pgtest"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/persistence/postgres"
)

// failoverModel answers the members' children with every user message
// they saw, joined by commas, once they saw the follow-ups "m0" to
// "m<want-1>" (calling the list tool meanwhile, so that follow-ups steered
// into the activation join its next request). The first child whose last
// message is "hold" gets its answer, "late", only once release is closed;
// held hears of its request.
type failoverModel struct {
	want     int
	held     chan struct{}
	release  chan struct{}
	heldOnce *atomic.Bool
}

func (m failoverModel) respond(r openaitest.Request) openaitest.Step {
	var users []string
	follows := 0
	for _, msg := range r.Messages {
		if msg.Role == "user" {
			users = append(users, msg.Text())
			if regexp.MustCompile(`^m\d+$`).MatchString(msg.Text()) {
				follows++
			}
		}
	}
	switch {
	case users[len(users)-1] == "hold" && m.heldOnce.CompareAndSwap(false, true):
		m.held <- struct{}{}
		<-m.release
		return openaitest.Reply("late")
	case follows > 0 && follows < m.want:
		return openaitest.Calls(openaitest.ToolCall{ID: fmt.Sprint("call_", len(r.Messages)), Name: "list", Args: `{"path": "."}`})
	}
	return openaitest.Reply(strings.Join(users, ","))
}

// failoverCluster is a database, the model, the member slots of a caller
// (a), two serving members (b, c) and a status client (d), and the
// environment the serving members run with.
type failoverCluster struct {
	url        string
	model      failoverModel
	srv        *openaitest.Server
	a, b, c, d member
	how        membership
	env        []string
	root       string
}

func newFailoverCluster(t *testing.T, want int) *failoverCluster {
	t.Helper()
	f := &failoverCluster{url: pgtest.Start(t).Fresh(t), root: writeTree(t),
		model: failoverModel{want: want, held: make(chan struct{}, 1), release: make(chan struct{}), heldOnce: new(atomic.Bool)}}
	f.srv = openaitest.NewResponder(t, f.model.respond)
	t.Cleanup(func() { // before the server's Close, which waits for a held request
		select {
		case <-f.model.release:
		default:
			close(f.model.release)
		}
	})
	f.a, f.b, f.c, f.d = newMember(t), newMember(t), newMember(t), newMember(t)
	f.how = static(f.a, f.b, f.c, f.d)
	f.env = append([]string{envStore + "=" + f.url}, modelEnv(f.srv)...)
	return f
}

// serve starts a member serving the model as "model" at m; it returns it
// with its member id once it joined.
func (f *failoverCluster) serve(t *testing.T, m member) (*process, string) {
	t.Helper()
	p := startNodeWith(t, f.env, false, append([]string{"serve", "-offer-model", "model", "-dir", f.root}, f.how(m)...)...)
	return p, memberLine.FindStringSubmatch(p.line(t, memberLine, "serve to join"))[1]
}

// caller starts the continuable test peer at a, restarting a child
// whose node was lost at most restarts times.
func (f *failoverCluster) caller(t *testing.T, restarts int) *peerProcess {
	t.Helper()
	var peers []string
	for _, m := range []member{f.a, f.b, f.c, f.d} {
		peers = append(peers, m.membership)
	}
	p := &peerProcess{process: process{stderr: new(testkit.Buffer)}}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), envTestPeer+"="+strings.Join([]string{"continuable", f.a.listen, f.a.membership, strings.Join(peers, ","), f.url, strconv.Itoa(restarts)}, " "))
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	p.lines = startLines(t, p.cmd)
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p
}

// hosted is how many runs member id hosts, as node status prints it.
func (f *failoverCluster) hosted(t *testing.T, id string) string {
	t.Helper()
	status := startNode(t, append([]string{"status"}, f.how(f.d)...)...)
	if code := status.rest(t); code != 0 {
		t.Fatalf("status exit %d, stderr %s", code, status.stderr.String())
	}
	for _, l := range status.all {
		if strings.HasPrefix(l, id+" ") {
			return l[strings.LastIndex(l, "runs=")+len("runs="):]
		}
	}
	return "unlisted"
}

// midTurnOnB starts member B, a caller (see caller) and its continuable
// child, placed on B, the only member then, where it waits for its
// model's answer (held); it then starts member C.
func (f *failoverCluster) midTurnOnB(t *testing.T, restarts int) (nodeB *process, idB string, caller *peerProcess, child string) {
	t.Helper()
	nodeB, idB = f.serve(t, f.b)
	caller = f.caller(t, restarts)
	caller.command(t, "start hold")
	child = caller.next(t, "child").Child
	testkit.Recv(t, f.model.held, "B's model request")
	f.serve(t, f.c)
	return nodeB, idB, caller, child
}

// log is the child's log in the database.
func (f *failoverCluster) log(t *testing.T, child string) []persistence.Record {
	t.Helper()
	store, err := postgres.Open(context.Background(), f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, recs, err := store.Load(testkit.Ctx(t), child)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// kill SIGKILLs p and reaps it.
func kill(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// peerProcess is the continuable test peer.
type peerProcess struct{ process }

func (p *peerProcess) command(t *testing.T, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(p.stdin, format+"\n", args...); err != nil {
		t.Fatalf("command to the peer: %v; stderr %s", err, p.stderr.String())
	}
}

// next is the peer's next line of event.
func (p *peerProcess) next(t *testing.T, event string) peerLine {
	t.Helper()
	var l peerLine
	if err := json.Unmarshal([]byte(p.line(t, regexp.MustCompile(`"event":"`+event+`"`), "the peer's "+event+" line")), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// Contracts K2, S8: a continuable child is a grain keyed by its child
// id: its first activation and its follow-up run on the member the
// cluster's identity lookup names for it, whatever the members' loads.
// Twelve children on two idle members: each child's follow-up runs where
// its first activation ran, and both members are some child's home
// (placement by load alone would put every one on the member first by
// id).
func TestK2_S8_AContinuableChildRunsOnItsHomeMember(t *testing.T) {
	f := newFailoverCluster(t, 1)
	_, idB := f.serve(t, f.b)
	_, idC := f.serve(t, f.c)
	caller := f.caller(t, 0)
	homes := map[string]int{}
	for i := range 12 {
		caller.command(t, "start c%d", i)
		child := caller.next(t, "child").Child
		first := caller.next(t, "task")
		if first.State != "completed" || (first.Member != idB && first.Member != idC) {
			t.Fatalf("child %d's first activation: %+v, want it completed on %s or %s", i, first, idB, idC)
		}
		caller.command(t, "send %s 1 m", child)
		if l := caller.next(t, "routes"); l.Started != 1 || l.Failed != "" {
			t.Fatalf("child %d's follow-up: %+v, want one activation started", i, l)
		}
		if l := caller.next(t, "task"); l.State != "completed" || l.Member != first.Member {
			t.Fatalf("child %d's follow-up ran %+v, want it completed on its home %s", i, l, first.Member)
		}
		homes[first.Member]++
	}
	if homes[idB] == 0 || homes[idC] == 0 {
		t.Fatalf("homes %v: want children on both members", homes)
	}
}

// Contracts K2, S8, S6: a continuable child ran on member B; B is
// SIGKILLed; fifty follow-ups sent at once from the caller resume it on
// member C, from the log B wrote to the shared database, in exactly one
// activation: one follow-up starts it, the other 49 are steered into it,
// and its answer holds the child's first turn and every follow-up once.
func TestK2_S8_FiftyFollowUpsResumeAKilledNodesChildOnAnotherOnce(t *testing.T) {
	const n = 50
	f := newFailoverCluster(t, n)
	nodeB, _ := f.serve(t, f.b)
	caller := f.caller(t, 0)
	caller.command(t, "start first")
	child := caller.next(t, "child").Child
	if l := caller.next(t, "task"); l.State != "completed" || l.Output != "first" {
		t.Fatalf("the first activation on B: %+v", l)
	}
	f.serve(t, f.c)
	kill(t, nodeB)

	caller.command(t, "send %s %d m", child, n)
	if l := caller.next(t, "routes"); l.Started != 1 || l.Steered != n-1 || l.Failed != "" {
		t.Fatalf("fifty follow-ups after B died: %+v, want one activation started and %d steered into it", l, n-1)
	}
	l := caller.next(t, "task")
	seen := strings.Split(l.Output, ",")
	if l.State != "completed" || seen[0] != "first" || len(seen) != n+1 {
		t.Fatalf("the activation on C: %+v, want the first turn and %d follow-ups", l, n)
	}
	for i := range n {
		if strings.Count(","+l.Output+",", fmt.Sprintf(",m%d,", i)) != 1 {
			t.Fatalf("follow-up m%d is not in the answer once: %q", i, l.Output)
		}
	}
}

// Contracts K2, S8: a continuable child mid-turn on member B, B frozen
// (SIGSTOP): the caller's activation ends naming B; a follow-up resumes
// the child on C, which takes its log; B thawed (SIGCONT) cannot append
// to it (its activation, answered by the model, fails its next append:
// the log moved) and disposes what it held. The log has the first prompt, C's turn and nothing of B's
// late answer.
func TestK2_S8_AThawedNodeCannotWriteTheLogOfAChildResumedElsewhere(t *testing.T) {
	f := newFailoverCluster(t, 0)
	nodeB, idB, caller, child := f.midTurnOnB(t, 0)
	if err := nodeB.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if l := caller.next(t, "task"); l.State == "completed" || !strings.Contains(l.Detail, idB) {
		t.Fatalf("the activation on the frozen B ended %+v, want a failure naming %s", l, idB)
	}

	caller.command(t, "send %s 1 again", child)
	if l := caller.next(t, "routes"); l.Started != 1 {
		t.Fatalf("the follow-up after B froze: %+v", l)
	}
	if l := caller.next(t, "task"); l.State != "completed" || l.Output != "hold,again0" {
		t.Fatalf("the activation on C: %+v, want the child's first prompt and the follow-up", l)
	}

	if err := nodeB.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	close(f.model.release)
	eventually(t, "B to dispose the activation it held", func() bool { return f.hosted(t, idB) == "0" })
	// B's activation had its answer (the fence, not a cancel, kept it
	// out of the log).
	i := slices.IndexFunc(f.srv.Requests(), func(r openaitest.Request) bool {
		return len(r.Messages) == 1 && r.Messages[0].Text() == "hold"
	})
	if i < 0 || f.srv.Requests()[i].Cancelled {
		t.Fatalf("B's model request (at %d) was not answered", i)
	}
	recs := f.log(t, child)
	var log strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&log, "%s %s\n", r.Kind, r.Data)
	}
	if strings.Contains(log.String(), "late") || !strings.Contains(log.String(), "hold,again0") {
		t.Fatalf("the child's log:\n%s\nwant C's turn and nothing of B's", log.String())
	}
}

// Contracts A3, K2, S9: with a restart policy (the Service's OneForOne
// strategy, registry.WithRunRestarts), a continuable child mid-turn on
// member B, B SIGKILLed: the loss is a crash of its run, which the
// strategy restarts from its checkpoint, the child's log, on member C:
// the activation completes there (its task never failed), its log taken
// by C (one activation marker) and ending completed.
func TestA3_K2_ALostRemoteRunIsRestartedElsewhereFromItsCheckpoint(t *testing.T) {
	f := newFailoverCluster(t, 0)
	nodeB, _, caller, child := f.midTurnOnB(t, 1)
	kill(t, nodeB)
	if l := caller.next(t, "task"); l.State != "completed" || l.Output != "hold" {
		t.Fatalf("the activation whose node was killed: %+v, want it restarted on C and completed", l)
	}
	recs := f.log(t, child)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	if strings.Count(strings.Join(kinds, " "), "agent/activation") != 1 || kinds[len(kinds)-1] != "agent/stop" {
		t.Fatalf("the child's log %q, want one activation taken by C and its stop", kinds)
	}
}
