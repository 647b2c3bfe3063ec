// Package tasks holds the model-facing task tools (T3), shared by every
// background delegation: task_output reads a task's state and result,
// waiting up to a limit for it to finish, and task_kill stops it. A model
// sees only the tasks its own agent started.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/subactor/subactor/actors/tasks"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/jsonv2"
	"github.com/subactor/subactor/subagent"
)

// Tool names.
const (
	outputName = "task_output"
	killName   = "task_kill"
)

// maxWait bounds task_output's wait_seconds (K3).
const maxWait = 600

// maxTaskID bounds a task id argument (ids are UUIDs).
const maxTaskID = 64

// ErrArgs is matched by every argument error.
var ErrArgs = errors.New("tasks: invalid arguments")

// Tools returns task_output and task_kill over m.
func Tools(m *tasks.Manager) []agent.Tool {
	return []agent.Tool{&output{m: m}, &kill{m: m}}
}

// taskAnswer is what both tools return: the task as it stands.
type taskAnswer struct {
	TaskID     string              `json:"taskId"`
	State      tasks.State         `json:"state"`
	RunID      string              `json:"runId"`
	SessionID  string              `json:"sessionId"`
	Output     string              `json:"output,omitempty"`
	Structured json.RawMessage     `json:"structured,omitempty"`
	StopReason subagent.StopReason `json:"stopReason,omitempty"`
	Detail     string              `json:"detail,omitempty"`
}

// answer is the taskAnswer of the task a manager call returned, or the
// call's error.
func answer(t tasks.Task, err error) (string, error) {
	if err != nil {
		return "", err
	}
	a := taskAnswer{TaskID: t.ID, State: t.State, RunID: t.RunID, SessionID: t.SessionID}
	if r := t.Result; r != nil {
		a.Output, a.Structured, a.StopReason, a.Detail = subagent.TextOf(r.Output), r.Structured, r.StopReason, r.Detail
		if t.Err != "" {
			a.Detail = t.Err
		}
	}
	out, err := json.Marshal(a)
	return string(out), err
}

type output struct{ m *tasks.Manager }

func (o *output) Spec() agent.ToolSpec {
	return agent.ToolSpec{
		Name:        outputName,
		Description: "Read a background task's state and result; with wait_seconds, wait up to that long for it to finish first.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"task_id":{"type":"string","maxLength":%d,"description":"The task id a background delegation answered with."},`+
			`"wait_seconds":{"type":"integer","minimum":1,"maximum":%d,"description":"How long to wait for the task to finish; leave it out to read the task at once."}},`+
			`"required":["task_id"],"additionalProperties":false}`, maxTaskID, maxWait)),
	}
}

func (o *output) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	var a struct {
		TaskID string `json:"task_id"`
		Wait   *int   `json:"wait_seconds"`
	}
	if err := parse(raw, &a, &a.TaskID); err != nil {
		return "", err
	}
	if a.Wait == nil {
		return answer(o.m.Get(ctx, caller.SessionID(), a.TaskID))
	}
	if *a.Wait < 1 || *a.Wait > maxWait {
		return "", fmt.Errorf("%w: wait_seconds must be from 1 to %d (leave it out to read the task at once)", ErrArgs, maxWait)
	}
	return answer(o.m.Collect(ctx, caller.SessionID(), a.TaskID, time.Duration(*a.Wait)*time.Second))
}

type kill struct{ m *tasks.Manager }

func (k *kill) Spec() agent.ToolSpec {
	return agent.ToolSpec{
		Name:        killName,
		Description: "Stop a background task; its child is cancelled.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"task_id":{"type":"string","maxLength":%d,"description":"The task id a background delegation answered with."}},`+
			`"required":["task_id"],"additionalProperties":false}`, maxTaskID)),
	}
}

func (k *kill) Call(ctx context.Context, caller *agent.Agent, raw json.RawMessage) (string, error) {
	var a struct {
		TaskID string `json:"task_id"`
	}
	if err := parse(raw, &a, &a.TaskID); err != nil {
		return "", err
	}
	return answer(k.m.Kill(ctx, caller.SessionID(), a.TaskID))
}

// parse decodes model-supplied arguments strictly (K3) and checks the
// task id they hold: the error matches ErrArgs and, for a decoding fault,
// wraps the *jsonv2.Error saying what is wrong where.
func parse(raw json.RawMessage, v any, id *string) error {
	if err := jsonv2.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %w", ErrArgs, err)
	}
	switch {
	case *id == "":
		return fmt.Errorf("%w: task_id is required", ErrArgs)
	case len(*id) > maxTaskID:
		return fmt.Errorf("%w: task_id has %d bytes, over its limit of %d", ErrArgs, len(*id), maxTaskID)
	}
	return nil
}
