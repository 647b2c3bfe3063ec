package main

import (
	"regexp"
	"slices"
	"testing"
)

// Contracts A3, K1, K3: an actor on another node process commands a run
// hosted by `node serve` with the run's own messages, as it would a local
// run: the host's RemoteStarted comes from the run actor, which the actor
// watches; a steer it sends is answered (refused: the agent's one turn
// takes none and then ends); a cancel from a second actor of its node is
// refused as foreign; its own cancel settles the run aborted; its
// Dispose is answered quiesced, and the watch ends with Terminated.
func TestA3_K1_AnActorOnAnotherNodeCommandsAHostedRunByMessage(t *testing.T) {
	a, b := newMember(t), newMember(t)
	nodeB, _ := serve(t, b, static(a, b))
	peer := startPeer(t, "commands", a.listen, a.membership, b.membership, b.listen)
	peer.line(t, regexp.MustCompile(`^started$`), "the run to start on B")
	peer.line(t, regexp.MustCompile(`^foreign foreign-run$`), "a foreign actor's cancel to be refused")
	var answers []string
	for !slices.Contains(answers, "terminated") {
		answers = append(answers, peer.line(t, regexp.MustCompile(`^(steer|settled|quiesced|terminated)`), "the run's answers"))
	}
	at := func(l string) int {
		i := slices.Index(answers, l)
		if i < 0 {
			t.Fatalf("answers %q: no %q", answers, l)
		}
		return i
	}
	at("steer false")
	if settled, quiesced := at("settled aborted"), at("quiesced"); settled > quiesced || quiesced > at("terminated") || len(answers) != 4 {
		t.Fatalf("answers %q: want the steer's, then settled, quiesced, terminated", answers)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent to end once the run was disposed")
}
