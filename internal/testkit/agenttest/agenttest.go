// Package agenttest has a Model for tests that need to see what an agent
// asked its model.
package agenttest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// Recorder answers with Reply and records every request by its task, the
// text of the first user message. It is safe for concurrent use.
type Recorder struct {
	reply func(agent.Request) agent.Response
	mu    sync.Mutex
	seen  map[string][]agent.Request
}

// NewRecorder returns a Recorder that answers with reply.
func NewRecorder(reply func(agent.Request) agent.Response) *Recorder {
	return &Recorder{reply: reply, seen: map[string][]agent.Request{}}
}

// Generate implements agent.Model.
func (m *Recorder) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	m.mu.Lock()
	task := subagent.TextOf(req.Messages[0].Content)
	m.seen[task] = append(m.seen[task], req)
	m.mu.Unlock()
	return m.reply(req), nil
}

// Requests returns the requests seen for task, in order.
func (m *Recorder) Requests(task string) []agent.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen[task])
}

// First is the first request seen for task; it fails t if there was none.
func (m *Recorder) First(t testing.TB, task string) agent.Request {
	t.Helper()
	reqs := m.Requests(task)
	if len(reqs) == 0 {
		t.Fatalf("the model saw no request for %q", task)
	}
	return reqs[0]
}
