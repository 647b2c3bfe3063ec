package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/subactor/subactor/internal/jsonv2"

	"go.uber.org/goleak"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/actors"
	"github.com/subactor/subactor/actors/registry"
	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/control"
	"github.com/subactor/subactor/tools/delegate"
	tasktools "github.com/subactor/subactor/tools/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// recall answers with every user message of its history.
type recall struct{}

func (recall) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	var seen []string
	for _, m := range req.Messages {
		if m.Role == agent.User {
			seen = append(seen, subagent.TextOf(m.Content))
		}
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(strings.Join(seen, ","))}}}, nil
}

// script calls the tools in turn, reading ids out of earlier results.
type script struct {
	mu    sync.Mutex
	steps int
}

func (s *script) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	s.mu.Lock()
	s.steps++
	step := s.steps
	s.mu.Unlock()
	last := subagent.TextOf(req.Messages[len(req.Messages)-1].Content)
	call := func(name, args string) (agent.Response, error) {
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: fmt.Sprint(step), Name: name, Args: json.RawMessage(args)}}}}, nil
	}
	var bg delegate.BackgroundAnswer
	var sent control.Answer
	switch step {
	case 1:
		return call("subagent", `{"description":"keep","prompt":"first","continuable":true}`)
	case 2:
		_ = json.Unmarshal([]byte(last), &bg)
		return call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_seconds":600}`, bg.TaskID))
	case 3:
		var first delegate.BackgroundAnswer
		_ = json.Unmarshal([]byte(subagent.TextOf(req.Messages[2].Content)), &first)
		return call("send_message", fmt.Sprintf(`{"subagent_id":%q,"message":"second"}`, first.SubagentID))
	case 4:
		_ = json.Unmarshal([]byte(last), &sent)
		return call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_seconds":600}`, sent.TaskID))
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text(req.Messages[len(req.Messages)-3].Content[0].Text + "\n" + last)}}}, nil
}

// Contracts T1, T2: a continuable delegation answers with a subagent id;
// send_message resumes the idle child with the follow-up, which sees its
// earlier turns.
func TestT1T2_ContinuableDelegationAndSendMessage(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	store := persistence.NewMemory()
	mgr := tasks.New(sys, store)
	defer mgr.Close(context.Background())
	rt, err := subactor.New(subactor.Config{System: sys, Store: store, Model: recall{}, Options: []registry.Option{registry.WithTasks(mgr)}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	tool := delegate.New(delegate.Config{Service: rt.Service, Provider: rt.Provider.Name(), Tasks: mgr})
	defer tool.Close()
	if !strings.Contains(string(tool.Spec().Parameters), `"continuable"`) {
		t.Fatalf("no continuable mode in %s", tool.Spec().Parameters)
	}
	tools := append([]agent.Tool{tool, control.New(control.Config{Service: rt.Service})}, tasktools.Tools(mgr)...)
	parent, err := agent.New(testkit.Ctx(t), agent.Config{Store: store, Model: &script{}, Tools: tools, Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	res := parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("go")}, nil)
	if res.StopReason != subagent.Completed {
		t.Fatalf("parent %+v", res)
	}
	lines := strings.Split(subagent.TextOf(res.Output), "\n")
	var sent control.Answer
	var second struct { // what task_output answers
		State  tasks.State `json:"state"`
		Output string      `json:"output"`
	}
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &sent) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("parent answered %q", subagent.TextOf(res.Output))
	}
	if sent.Route != registry.Started || second.State != tasks.Completed || second.Output != "first,second" {
		t.Fatalf("send_message %+v, then the child answered %+v", sent, second)
	}
}

// Contract K3: send_message's arguments are strict and bounded.
func TestK3_SendMessageArgumentsAreStrictAndBounded(t *testing.T) {
	tool := control.New(control.Config{MessageLimit: 5})
	a := &agent.Agent{}
	for _, args := range []string{`{}`, `{"subagent_id":"x"}`, `{"subagent_id":"x","message":"  "}`, `{"subagent_id":"x","message":"toolong"}`,
		`{"subagent_id":"x","message":"hi","extra":1}`, `{"subagent_id":"` + strings.Repeat("x", 65) + `","message":"hi"}`} {
		if _, err := tool.Call(testkit.Ctx(t), a, json.RawMessage(args)); !errors.Is(err, control.ErrArgs) {
			t.Errorf("%s: %v, want ErrArgs", args, err)
		}
	}
	if !strings.Contains(string(tool.Spec().Parameters), `"maxLength":5`) {
		t.Fatalf("the message limit is not advertised: %s", tool.Spec().Parameters)
	}
}

// Contract T2 (and K3): send_message reads its arguments strictly: a key
// given twice, in another case, unknown, or null is a typed error, never a
// silently chosen value.
func TestT2_SendMessageArgumentsAreStrict(t *testing.T) {
	tool := control.New(control.Config{})
	for args, problem := range map[string]jsonv2.Problem{
		`{"subagent_id":"x","subagent_id":"y","message":"hi"}`: jsonv2.Repeated,
		`{"subagent_id":"x","Message":"hi"}`:                   jsonv2.Unknown,
		`{"subagent_id":"x","message":"hi","extra":1}`:         jsonv2.Unknown,
		`{"subagent_id":null,"message":"hi"}`:                  jsonv2.Null,
		`{"subagent_id":1,"message":"hi"}`:                     jsonv2.Type,
		`{"subagent_id":"x","message":"hi"} {}`:                jsonv2.Syntax,
	} {
		_, err := tool.Call(testkit.Ctx(t), &agent.Agent{}, json.RawMessage(args))
		var jerr *jsonv2.Error
		if !errors.Is(err, control.ErrArgs) || !errors.As(err, &jerr) || jerr.Problem != problem {
			t.Errorf("%s: %v, want ErrArgs with problem %d", args, err, problem)
		}
	}
}
