package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/descriptor"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
)

// ResumeResult is the time to resume a child from disk: Service.Resume
// (loading its log, folding its descriptor, rebuilding its history) and
// its run until the model is first called, which comes after the new
// prompt is fsynced.
type ResumeResult struct {
	Turns int          `json:"turns"`
	Bytes int          `json:"logBytes"` // the history's message data
	First Distribution `json:"untilFirstModelCall"`
}

// firstCall is a model that reports when it is called, then answers.
type firstCall struct{ called chan time.Time }

func (m firstCall) Generate(ctx context.Context, _ agent.Request) (agent.Response, error) {
	m.called <- time.Now()
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("resumed")}}}, ctx.Err()
}

// Resume measures, for each history length, samples resumes of children
// on a bbolt store in dir (see ResumeOn).
func Resume(ctx context.Context, dir string, turns []int, samples int) ([]ResumeResult, error) {
	store, err := persistence.OpenBolt(filepath.Join(dir, "resume.db"))
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return ResumeOn(ctx, store, turns, samples)
}

// ResumeOn measures, for each history length, samples resumes of
// children on store, each a fresh child whose log holds its descriptor
// and turns alternating user and assistant messages of about 200 bytes
// (written outside the timing).
func ResumeOn(ctx context.Context, store persistence.Store, turns []int, samples int) ([]ResumeResult, error) {
	model := firstCall{called: make(chan time.Time, 1)}
	s, err := newSeamWith(ctx, spawn.Config{Model: model, Store: store})
	if err != nil {
		return nil, err
	}
	defer s.close()
	desc, err := descriptor.Descriptor{Provider: spawn.DefaultName}.Record()
	if err != nil {
		return nil, err
	}
	text := strings.Repeat("lorem ipsum ", 16)
	var out []ResumeResult
	for _, n := range turns {
		recs := []persistence.Record{desc}
		size := 0
		for t := range n {
			role := agent.User
			if t%2 == 1 {
				role = agent.Assistant
			}
			data, err := json.Marshal(agent.Message{Role: role, Content: []subagent.ContentBlock{subagent.Text(fmt.Sprint(t, " ", text))}})
			if err != nil {
				return nil, err
			}
			size += len(data)
			recs = append(recs, persistence.Record{Kind: persistence.KindMessage, Data: data})
		}
		d := make([]time.Duration, 0, samples)
		for i := range samples {
			id := fmt.Sprintf("resume-%d-%d", n, i)
			h := subagent.SessionHeader{SessionID: id, ParentSessionID: s.parent.SessionID(), DelegationDepth: 1}
			if _, err := store.CreateWith(ctx, h, recs...); err != nil {
				return nil, err
			}
			began := time.Now()
			run, err := s.svc.Resume(ctx, spawn.DefaultName, subagent.StartRequest{
				Parent: s.parent, Prompt: []subagent.ContentBlock{subagent.Text("go on")},
				Continuation: &subagent.Continuation{SessionID: id},
			})
			if err != nil {
				return nil, fmt.Errorf("resume at %d turns: %w", n, err)
			}
			called := <-model.called
			d = append(d, called.Sub(began))
			res, err := run.Wait(ctx)
			if err == nil && subagent.TextOf(res.Output) != "resumed" {
				err = fmt.Errorf("resumed child answered %+v", res)
			}
			if derr := run.Dispose(ctx); err == nil {
				err = derr
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, ResumeResult{Turns: n, Bytes: size, First: distribution(d)})
	}
	return out, nil
}
