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
// Dispose is answered quiesced, and the watch ends with Terminated (which
// protoactor hands the watcher ahead of the user messages in its mailbox,
// a system message: its place among the answers is not fixed).
func TestA3_K1_AnActorOnAnotherNodeCommandsAHostedRunByMessage(t *testing.T) {
	a, b := newMember(t), newMember(t)
	nodeB, _ := serve(t, b, static(a, b))
	peer := startPeer(t, "commands", a.listen, a.membership, b.membership, b.listen)
	peer.line(t, regexp.MustCompile(`^started$`), "the run to start on B")
	peer.line(t, regexp.MustCompile(`^foreign foreign-run$`), "a foreign actor's cancel to be refused")
	var answers []string
	for !slices.Contains(answers, "terminated") || !slices.Contains(answers, "quiesced") {
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
	at("terminated")
	if settled, quiesced := at("settled aborted"), at("quiesced"); settled > quiesced || len(answers) != 4 {
		t.Fatalf("answers %q: want the steer's, settled then quiesced, and terminated", answers)
	}
	noAgentsLeft(t, nodeB.cmd.Process.Pid, "B's agent to end once the run was disposed")
}

// Contracts A3, E1: a platform's actor in another process follows a
// parent's runs: registry.SendTo takes a remote PID as a local one, the
// parent actor sends it the run's events as protobuf messages over the
// network, in order, and Flush returns once it has handled them.
func TestA3_E1_SendToAnActorInAnotherProcess(t *testing.T) {
	sub, pub := newMember(t), newMember(t)
	subscriber := startPeer(t, "subscriber", sub.listen)
	subscriber.line(t, regexp.MustCompile(`^ready$`), "the subscriber to serve")
	publisher := startPeer(t, "publisher", pub.listen, sub.listen)
	publisher.line(t, regexp.MustCompile(`^flushed$`), "the publisher's Flush through the subscriber")
	subscriber.line(t, regexp.MustCompile(`^started spawn$`), "the run's start event")
	subscriber.line(t, regexp.MustCompile(`^progress `), "the run's progress")
	subscriber.line(t, regexp.MustCompile(`^ended completed hello across$`), "the run's end event, last")
}
