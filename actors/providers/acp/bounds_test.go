package acp_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/acpdata"
	"github.com/subactor/subactor/internal/agentlog"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

const mib = 1 << 20

// Contract K3: 150 tool calls left open with 64 KB titles (and 4 KB ids)
// cost the node what it keeps of each (maxKept bytes a string), not their
// size on the wire: the live heap grows by less than 6 MiB, where it grew
// by their 10 MB before the bound. (The 2 MB titles are the same
// case, measured on the fold itself in
// TestK3_OpenToolCallsOf2MBTitlesKeepLittle: through JSON and the race
// detector, 300 MB take minutes on a loaded machine.)
func TestK3_ACPOpenToolCallsKeepBoundedTitles(t *testing.T) {
	sys := newSystem(t)
	rec := newRecorder()
	base := liveHeap()
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, fakeConfig(t, sys, modeNormal)), request("bigtools 150 65536", "wait"))
	waitCount(t, rec, subagent.ToolCallStarted, 150)
	grown := int64(liveHeap()) - int64(base)
	t.Logf("live heap with 150 open tool calls of 64 KB titles: %+.1f MiB", float64(grown)/mib)
	if grown > 6*mib {
		t.Fatalf("the live heap grew by %.1f MiB, more than 6 MiB", float64(grown)/mib)
	}
	for _, ev := range rec.all() {
		if len(ev.Text) > 4096+len("…") {
			t.Fatalf("an event of %d bytes", len(ev.Text))
		}
	}
	_ = r.Dispose(testkit.Ctx(t))
}

// waitCount waits until rec has n events of kind, and fails saying how
// many came (the events themselves are too big to print).
func waitCount(t *testing.T, rec *recorder, kind subagent.ProgressKind, n int) {
	t.Helper()
	count := func() int {
		c := 0
		for _, ev := range rec.all() {
			if ev.Kind == kind {
				c++
			}
		}
		return c
	}
	deadline := time.NewTimer(testkit.Deadline)
	defer deadline.Stop()
	for count() < n {
		select {
		case <-rec.changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %d %s events; %d came", testkit.Deadline, n, kind, count())
		}
	}
}

// reports listens on a unix socket for the fake agent's reports (see
// floodAsk) and returns its path and the lines reported.
func reports(t *testing.T) (string, <-chan string) {
	t.Helper()
	// A short path: a socket's is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "acp")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "report")
	l, err := net.Listen("unix", path)
	must(t, err)
	lines := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return path, lines
}

// Contract K3: an agent that stops reading its input and floods
// permission requests (100,000 of them) is held back: past MaxRequests in
// flight the node answers errors itself, and once the agent does not read
// those either the node stops reading its output, so the agent waits on
// its pipe. The parent is told once (LimitReached); the node's heap and
// goroutines stay bounded (it grew by 962 MB before), and the run still
// ends when disposed.
func TestK3_ACPPermissionFloodFromAnAgentNotReading(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	path, lines := reports(t)
	cfg.Env[envReport] = path
	rec := newRecorder()
	base, goroutines := liveHeap(), runtime.NumGoroutine()
	const flood = 100000
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, cfg), request(fmt.Sprintf("floodask %d", flood)))
	report := testkit.Recv(t, lines, "the agent's report")
	m := regexp.MustCompile(`^blocked (\d+)$`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("the agent reported %q: the node read everything it wrote", report)
	}
	waitCount(t, rec, acpdata.LimitReached, 1)
	written, _ := strconv.Atoi(m[1])
	grown, more := int64(liveHeap())-int64(base), runtime.NumGoroutine()-goroutines
	t.Logf("agent held back after %d requests; live heap %+.1f MiB, %+d goroutines", written, float64(grown)/mib, more)
	if written >= flood/10 || grown > 16*mib || more > acp.MaxRequests+64 {
		t.Fatalf("after %d requests: live heap %+.1f MiB (ceiling 16), %+d goroutines (ceiling %d)", written, float64(grown)/mib, more, acp.MaxRequests+64)
	}
	for _, ev := range rec.all() {
		if ev.Kind == acpdata.LimitReached && (!ev.IsError || !strings.Contains(ev.Text, "session/request_permission")) {
			t.Fatalf("limit event %+v", ev)
		}
	}
	if err := r.Dispose(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, r); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}

// Contract K3: 150 reads of an 8 MiB file in flight at once hold at most
// MaxHeldBytes of text and answers: the first are served, the rest
// answered with an error the agent may retry on, and the parent is told.
// The heap's peak stays under 128 MiB above where it started (2.7 GB
// before the bound).
func TestK3_ACPReadFloodHoldsBoundedBytes(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.ReadFiles = true
	big := filepath.Join(cfg.Dir, "big")
	must(t, os.WriteFile(big, []byte(strings.Repeat("0123456789abcde\n", 8*mib/16)), 0o644))
	rec := newRecorder()
	base := liveHeap()
	peak := testkit.HeapPeak()
	res := wait(t, startScoped(t, testkit.Ctx(t), rec, newProvider(t, cfg), request("readflood 150 "+big)))
	grown := int64(peak()) - int64(base)
	out := subagent.TextOf(res.Output)
	m := regexp.MustCompile(`^readflood:(\d+) ok 0 refused (\d+) bounded 0 other;$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("output %q", out)
	}
	ok, bounded := m[1], m[2]
	t.Logf("150 reads of 8 MiB: %s served, %s bounded; heap peak %+.1f MiB", ok, bounded, float64(grown)/mib)
	if ok == "0" || bounded == "0" || grown > 128*mib {
		t.Fatalf("%s served, %s bounded, heap peak %+.1f MiB (ceiling 128)", ok, bounded, float64(grown)/mib)
	}
	waitCount(t, rec, acpdata.LimitReached, 1)
}

// Contract K4: an agent that stops reading its input while it floods
// requests does not hold its turn forever. A write to it waits at most
// WriteTimeout; then the turn ends by itself with an error naming the
// agent and what it stopped doing; when it has ended (before any
// Dispose) the agent's process group is gone, and the store holds the
// turn's records (descriptor, prompt, and the stop with its error), still
// after the Dispose: nothing stored is lost. The node's heap stays
// bounded.
func TestK4_ACPTurnOfAnAgentThatStopsReadingEnds(t *testing.T) {
	sys := newSystem(t)
	cfg := fakeConfig(t, sys, modeNormal)
	cfg.WriteTimeout = 200 * time.Millisecond
	store := persistence.NewMemory()
	cfg.Store = store
	path, _ := reports(t)
	cfg.Env[envReport] = path
	base := liveHeap()
	r := start(t, testkit.Ctx(t), newProvider(t, cfg), request("floodask 100000"))
	pgid := r.ProcessID()
	res := wait(t, r)
	if res.StopReason != subagent.Error || !errors.Is(res.Cause, acp.ErrAgentNotReading) ||
		!strings.Contains(res.Detail, fmt.Sprintf("agent server %q stopped reading its input", cmp.Or(cfg.Name, acp.DefaultName))) {
		t.Fatalf("result %+v", res)
	}
	if !groupGone(pgid) {
		t.Fatalf("the turn ended with the agent's process group %d still running (before any Dispose)", pgid)
	}
	stored := func(when string) {
		t.Helper()
		_, recs, err := store.Load(testkit.Ctx(t), r.SessionID())
		var stop agentlog.Stop
		var prompt agent.Message
		if err != nil || len(recs) != 3 || recs[0].Kind != descriptor.Kind ||
			recs[1].Kind != persistence.KindMessage || json.Unmarshal(recs[1].Data, &prompt) != nil || subagent.TextOf(prompt.Content) != "floodask 100000" ||
			recs[2].Kind != agentlog.KindStop || json.Unmarshal(recs[2].Data, &stop) != nil ||
			stop.StopReason != subagent.Error || stop.Detail != res.Detail {
			t.Fatalf("%s, the store holds %+v, %v; want the descriptor, the prompt and the stop %q", when, recs, err, res.Detail)
		}
	}
	stored("once the turn ended")
	must(t, r.Dispose(testkit.Ctx(t)))
	stored("after Dispose")
	if grown := int64(liveHeap()) - int64(base); grown > 16*mib {
		t.Fatalf("live heap %+.1f MiB (ceiling 16)", float64(grown)/mib)
	}
}
