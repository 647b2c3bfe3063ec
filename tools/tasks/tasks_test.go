package tasks_test

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
	mgrpkg "github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/persistence"
	"github.com/subactor/subactor/subagent"
	"github.com/subactor/subactor/tools/delegate"
	"github.com/subactor/subactor/tools/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.DeadLetters) }

// children answer "fast" at once and wait on "slow" until cancelled.
type children struct{}

func (children) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if p := subagent.TextOf(req.Messages[0].Content); p != "slow" {
		return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("did " + p)}}}, nil
	}
	<-ctx.Done()
	return agent.Response{}, context.Cause(ctx)
}

// parentModel delegates two background children, then collects the fast
// one and kills the slow one, then collects the slow one, then answers
// with what it read.
type parentModel struct {
	mu     sync.Mutex
	seen   []agent.Request
	slowID string
	read   string // the collect and kill answers
}

func (m *parentModel) Generate(_ context.Context, req agent.Request) (agent.Response, error) {
	m.mu.Lock()
	m.seen = append(m.seen, req)
	step := len(m.seen)
	m.mu.Unlock()
	call := func(id, name, args string) agent.ToolCall {
		return agent.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
	}
	last := func(n int) []agent.Message { return req.Messages[len(req.Messages)-n:] }
	switch step {
	case 1:
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{
			call("a", "subagent", `{"description":"slow one","prompt":"slow","run_in_background":true}`),
			call("b", "subagent", `{"description":"fast one","prompt":"fast","run_in_background":true}`),
		}}}, nil
	case 2:
		var slow, fast delegate.BackgroundAnswer
		res := last(2)
		if json.Unmarshal([]byte(subagent.TextOf(res[0].Content)), &slow) != nil || json.Unmarshal([]byte(subagent.TextOf(res[1].Content)), &fast) != nil {
			return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{subagent.Text("bad background answers")}}}, nil
		}
		m.slowID = slow.TaskID
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{
			call("c", "task_output", fmt.Sprintf(`{"task_id":%q,"wait_seconds":600}`, fast.TaskID)),
			call("d", "task_kill", fmt.Sprintf(`{"task_id":%q}`, slow.TaskID)),
		}}}, nil
	case 3:
		res := last(2)
		m.read = subagent.TextOf(res[0].Content) + "\n" + subagent.TextOf(res[1].Content)
		return agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{
			call("e", "task_output", fmt.Sprintf(`{"task_id":%q,"wait_seconds":600}`, m.slowID)),
		}}}, nil
	}
	return agent.Response{Message: agent.Message{Content: []subagent.ContentBlock{
		subagent.Text(m.read + "\n" + subagent.TextOf(last(1)[0].Content))}}}, nil
}

// Contracts T1, T3: background delegation answers at once with a task id;
// task_output collects a finished child's result, task_kill stops a
// running one.
func TestT1T3_BackgroundDelegationWithTaskTools(t *testing.T) {
	rt, err := subactor.New(subactor.Config{Model: children{}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	mgr := mgrpkg.New(rt.System, rt.Store.(persistence.TaskStore)) // the memory store keeps tasks too
	defer mgr.Close(context.Background())
	tool := delegate.New(delegate.Config{Service: rt.Service, Provider: rt.Provider.Name(), Tasks: mgr})
	defer tool.Close()
	if !strings.Contains(string(tool.Spec().Parameters), "run_in_background") {
		t.Fatalf("the tool's schema offers no background mode: %s", tool.Spec().Parameters)
	}
	model := &parentModel{}
	parent, err := agent.New(testkit.Ctx(t), agent.Config{Store: rt.Store, Model: model,
		Tools: append([]agent.Tool{tool}, tasks.Tools(mgr)...), Header: subagent.SessionHeader{SessionID: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	res := parent.Run(testkit.Ctx(t), []subagent.ContentBlock{subagent.Text("go")}, nil)
	if res.StopReason != subagent.Completed {
		t.Fatalf("parent %+v", res)
	}
	lines := strings.Split(subagent.TextOf(res.Output), "\n")
	var collected, killing, killed tasks.Answer
	if len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &collected) != nil || json.Unmarshal([]byte(lines[1]), &killing) != nil ||
		json.Unmarshal([]byte(lines[2]), &killed) != nil {
		t.Fatalf("parent answered %q", subagent.TextOf(res.Output))
	}
	if collected.State != mgrpkg.Completed || collected.Output != "did fast" || collected.StopReason != subagent.Completed {
		t.Fatalf("task_output gave %+v", collected)
	}
	// task_kill answers at once; the task reads stopping until settled.
	if killing.State != mgrpkg.Stopping {
		t.Fatalf("task_kill gave %+v", killing)
	}
	if killed.State != mgrpkg.Killed || killed.StopReason != subagent.Aborted || killed.Output != "" {
		t.Fatalf("task_output after the kill gave %+v", killed)
	}
}

// Contract K3: the task tools' arguments are hostile input: strict, bounded
// and advertised in their schemas.
func TestK3_TaskToolArgumentsAreStrictAndBounded(t *testing.T) {
	rt, err := subactor.New(subactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	mgr := mgrpkg.New(rt.System, nil)
	defer mgr.Close(context.Background())
	parent, err := rt.NewAgent(testkit.Ctx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	tools := tasks.Tools(mgr)
	for _, tool := range tools {
		if !strings.Contains(string(tool.Spec().Parameters), `"maxLength":64`) {
			t.Fatalf("%s does not advertise its id limit: %s", tool.Spec().Name, tool.Spec().Parameters)
		}
	}
	for _, args := range []string{
		`{}`, `{"task_id":""}`, `{"task_id":"x","extra":1}`, `{"task_id":"x"} {}`,
		`{"task_id":"` + strings.Repeat("x", 65) + `"}`, `{"task_id":"x","wait_seconds":601}`, `{"task_id":"x","wait_seconds":-1}`, `{"task_id":"x","wait_seconds":0}`,
	} {
		if _, err := tools[0].Call(testkit.Ctx(t), parent, json.RawMessage(args)); !errors.Is(err, tasks.ErrArgs) {
			t.Errorf("task_output %s: %v, want ErrArgs", args, err)
		}
	}
	if _, err := tools[1].Call(testkit.Ctx(t), parent, json.RawMessage(`{"task_id":"nobody"}`)); !errors.Is(err, mgrpkg.ErrNoTask) {
		t.Errorf("task_kill of an unknown task: %v", err)
	}
}

// Contract T3 (and K3): the task tools read their arguments strictly: a
// key given twice, in another case, unknown, or null is a typed error,
// never a silently chosen value.
func TestT3_TaskToolArgumentsAreStrict(t *testing.T) {
	for _, tool := range tasks.Tools(nil) {
		for args, problem := range map[string]jsonv2.Problem{
			`{"task_id":"a","task_id":"b"}`: jsonv2.Repeated,
			`{"Task_id":"a"}`:               jsonv2.Unknown,
			`{"task_id":"a","extra":1}`:     jsonv2.Unknown,
			`{"task_id":null}`:              jsonv2.Null,
			`{"task_id":["a"]}`:             jsonv2.Type,
		} {
			_, err := tool.Call(testkit.Ctx(t), &agent.Agent{}, json.RawMessage(args))
			var jerr *jsonv2.Error
			if !errors.Is(err, tasks.ErrArgs) || !errors.As(err, &jerr) || jerr.Problem != problem {
				t.Errorf("%s %s: %v, want ErrArgs with problem %d", tool.Spec().Name, args, err, problem)
			}
		}
	}
}
