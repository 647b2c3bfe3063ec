package agentproc

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// K3, N1: KillAgents is a program's last resort before it exits, so its
// wait for the leaders it killed is bounded as a whole: two leaders that
// are never reaped (a process stuck in the kernel) cost it killWait once,
// not a wait without end for the second.
func TestK3_KillAgentsWaitsForUnreapedLeadersAtMostKillWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		for range 2 {
			// No such process group: signalling it finds nothing.
			p := &Proc{pid: 1 << 30, tag: "never-reaped", exited: make(chan struct{}), log: log}
			agents.add(p)
			defer agents.remove(p)
		}
		done := make(chan struct{})
		start := time.Now()
		go func() {
			KillAgents()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("KillAgents still waits for unreaped leaders a minute on")
		}
		if waited := time.Since(start); waited != killWait {
			t.Errorf("KillAgents waited %v for unreaped leaders, want killWait (%v)", waited, killWait)
		}
	})
}
