package main

// Contract K2: every cluster command ends within two seconds of SIGTERM,
// whatever its peers do, and a join that cannot reach the membership
// ends within -join-timeout, exit 1, naming what it could not reach.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/subactor/subactor/internal/testkit"
)

// stopBound is how soon after SIGTERM a command must have ended.
var stopBound = testkit.Scale(2 * time.Second)

// nowhere is an etcd endpoint on loopback that nothing serves.
func nowhere(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", portPair(t)) }

// terminate sends SIGTERM to p and fails unless it ends within stopBound.
func terminate(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	p.rest(t)
	if took := time.Since(sent); took > stopBound {
		t.Fatalf("%v ended %s after SIGTERM, past %s; stderr %s", p.cmd.Args[1:], took, stopBound, p.stderr.String())
	}
}

// Contract K2: with etcd never started, status, serve and delegate
// -cluster are stuck joining; SIGTERM ends each within two seconds.
func TestK2_SIGTERMEndsACommandJoiningAnEtcdNeverStarted(t *testing.T) {
	for _, args := range [][]string{
		{"status"},
		{"serve", "-config", fakeConfig(t)},
		{"delegate", "-cluster", "-provider", "fake"},
	} {
		t.Run(args[0], func(t *testing.T) {
			args = append(args, "-listen", newMember(t).listen, "-etcd", nowhere(t))
			if args[0] == "delegate" {
				args = append(args, "hello")
			}
			p := startNode(t, args...)
			eventually(t, "the node to say it is joining", func() bool { return strings.Contains(p.stderr.String(), "joining cluster") })
			terminate(t, p)
		})
	}
}

// Contract K2: a caller whose remote result is pending (the hosting node
// frozen, so that the cancel is never answered) ends within two seconds
// of SIGTERM, exit 143 (128 + SIGTERM: the run did not complete).
func TestK2_SIGTERMEndsADelegateWhoseRemoteResultIsPending(t *testing.T) {
	nodeB, caller := midRun(t)
	if err := nodeB.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	terminate(t, caller)
	if code := caller.cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("delegate exit %d, want %d; stderr %s", code, 128+int(syscall.SIGTERM), caller.stderr.String())
	}
}

// Contract K2: a join that cannot reach etcd ends after -join-timeout,
// exit 1, naming the endpoints; status alone in a static list ends exit
// 1 naming the peers it could not reach.
func TestK2_AJoinThatReachesNothingEndsNamingWhat(t *testing.T) {
	endpoint := nowhere(t)
	start := time.Now()
	p := startNode(t, "status", "-listen", newMember(t).listen, "-etcd", endpoint, "-join-timeout", "1s")
	code := p.rest(t)
	if took := time.Since(start); code != exitFailed || !strings.Contains(p.stderr.String(), "could not reach etcd at "+endpoint) || took > testkit.Scale(5*time.Second) {
		t.Fatalf("status with etcd unreachable: exit %d after %s, stderr %s", code, took, p.stderr.String())
	}

	a, b := newMember(t), newMember(t)
	p = startNode(t, append([]string{"status"}, static(a, b)(a)...)...)
	if code := p.rest(t); code != exitFailed || !strings.Contains(p.stderr.String(), "no other member answered at the peers "+a.membership+","+b.membership) {
		t.Fatalf("status alone: exit %d, stderr %s", code, p.stderr.String())
	}
}
