package acp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(runFakeAgent(mode))
	}
	goleak.VerifyTestMain(m, testkit.DeadLetters)
}

// parentAgent is a delegating agent as the seam sees it.
type parentAgent struct{ id string }

func (a parentAgent) ID() string        { return a.id }
func (a parentAgent) SessionID() string { return "session-" + a.id }
func (a parentAgent) Header() subagent.SessionHeader {
	return subagent.SessionHeader{SessionID: a.SessionID()}
}
func (a parentAgent) Options() subagent.AgentOptions { return subagent.AgentOptions{} }

var top = parentAgent{id: "top"}

func newSystem(t *testing.T) *actors.System {
	t.Helper()
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	return sys
}

// fakeConfig configures the fake agent in mode, with short ladder rungs.
func fakeConfig(t *testing.T, sys *actors.System, mode string) acp.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return acp.Config{
		System:  sys,
		Command: exe,
		Env: map[string]string{
			envMode:   mode,
			envStarts: filepath.Join(t.TempDir(), "starts"),
			// A race-enabled binary sleeps a second before it exits,
			// which every ladder would wait for.
			"GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"),
		},
		Dir:          t.TempDir(),
		StartTimeout: testkit.Deadline / 2,
		// Short, so that the ladders' tests are quick; scaled on a
		// loaded machine (SUBACTOR_TEST_DEADLINE_SCALE).
		CancelWait: testkit.Scale(300 * time.Millisecond),
		StopWait:   testkit.Scale(300 * time.Millisecond),
	}
}

// starts counts the fake agents started under cfg.
func starts(t *testing.T, cfg acp.Config) int {
	t.Helper()
	data, err := os.ReadFile(cfg.Env[envStarts])
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// startedPids are the process ids of the fake agents started under cfg.
func startedPids(t *testing.T, cfg acp.Config) []int {
	t.Helper()
	data, err := os.ReadFile(cfg.Env[envStarts])
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		pid, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			t.Fatalf("starts file line %q", line)
		}
		pids = append(pids, pid)
	}
	return pids
}

// provider is what acp.New returns: a subagent.Provider that resumes.
type provider interface {
	subagent.Provider
	subagent.Resumer
}

func newProvider(t *testing.T, cfg acp.Config) provider {
	t.Helper()
	p, err := acp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.(provider)
}

// recorder is an EventSink that keeps every event.
type recorder struct {
	mu      sync.Mutex
	evs     []subagent.RunProgress
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) Emit(ev subagent.RunProgress) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []subagent.RunProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]subagent.RunProgress(nil), r.evs...)
}

// waitFor waits until an event satisfies pred.
func (r *recorder) waitFor(t *testing.T, what string, pred func(subagent.RunProgress) bool) {
	t.Helper()
	deadline := time.NewTimer(testkit.Deadline)
	defer deadline.Stop()
	for {
		for _, ev := range r.all() {
			if pred(ev) {
				return
			}
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %s; events: %+v", testkit.Deadline, what, r.all())
		}
	}
}

func kindIs(k subagent.ProgressKind) func(subagent.RunProgress) bool {
	return func(ev subagent.RunProgress) bool { return ev.Kind == k }
}

// request is a start request whose prompt is a fake-agent script.
func request(lines ...string) subagent.StartRequest {
	return subagent.StartRequest{
		Prompt: []subagent.ContentBlock{subagent.Text(strings.Join(lines, "\n"))},
		Parent: top,
	}
}

// scoped is a scope whose progress goes to rec, as the Service hands a
// provider.
func scoped(rec *recorder) subagent.Scope {
	return subagent.Scope{Events: rec}
}

// start starts a run, as a caller other than the Service, and disposes it
// when the test ends.
func start(t *testing.T, ctx context.Context, p subagent.Provider, req subagent.StartRequest) *acp.Run {
	t.Helper()
	return startIn(t, ctx, subagent.Scope{}, p, req)
}

// startScoped is start with a scope whose progress goes to rec.
func startScoped(t *testing.T, ctx context.Context, rec *recorder, p subagent.Provider, req subagent.StartRequest) *acp.Run {
	t.Helper()
	return startIn(t, ctx, scoped(rec), p, req)
}

func startIn(t *testing.T, ctx context.Context, scope subagent.Scope, p subagent.Provider, req subagent.StartRequest) *acp.Run {
	t.Helper()
	r, err := p.Start(ctx, scope, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Dispose(context.Background()); err != nil {
			t.Errorf("Dispose: %v", err)
		}
	})
	return r.(*acp.Run)
}

// wait waits for a run's result.
func wait(t *testing.T, r subagent.Run) subagent.Result {
	t.Helper()
	res, err := r.Wait(testkit.Ctx(t))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

// startWithPid starts a fake agent of mode, which writes the pid of a
// process it starts to a file, waits for its first chunk and returns the
// run with that pid (and the file's text), and its config.
func startWithPid(t *testing.T, mode string) (*acp.Run, int, []byte, acp.Config) {
	t.Helper()
	rec := newRecorder()
	cfg := fakeConfig(t, newSystem(t), mode)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg.Env[envPidFile] = pidFile
	r := startScoped(t, testkit.Ctx(t), rec, newProvider(t, cfg), request("say ready", "wait"))
	rec.waitFor(t, "the first chunk", kindIs(subagent.TextDelta))
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	return r, pid, data, cfg
}
