package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	einoagent "github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoChildName is the child agent's name, and so the name of the tool that
// adk.NewAgentTool makes of it.
const einoChildName = "echo"

// einoParentModel is the parent's scripted model: with no tool result in its
// input it calls the child tool with the request "echo hi"; once the last
// message is a tool result it answers with that result. It holds no state,
// so it is safe for concurrent use.
type einoParentModel struct{}

func (einoParentModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	if n := len(in); n > 0 && in[n-1].Role == schema.Tool {
		return schema.AssistantMessage(in[n-1].Content, nil), nil
	}
	return schema.AssistantMessage("", []schema.ToolCall{{
		ID:       "call-1",
		Type:     "function",
		Function: schema.FunctionCall{Name: einoChildName, Arguments: `{"request":"echo hi"}`},
	}}), nil
}

func (m einoParentModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return streamOf(m.Generate(ctx, in, opts...))
}

func (m einoParentModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// einoChildModel is the child's scripted model: it answers "hi" at once.
type einoChildModel struct{}

func (einoChildModel) Generate(context.Context, []*schema.Message, ...model.Option) (*schema.Message, error) {
	return schema.AssistantMessage("hi", nil), nil
}

func (m einoChildModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return streamOf(m.Generate(ctx, in, opts...))
}

func (m einoChildModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

func streamOf(msg *schema.Message, err error) (*schema.StreamReader[*schema.Message], error) {
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// einoPeer is the parent agent with its child wrapped as a tool, built once
// as a deployment would, and the runner that drives one parent run.
type einoPeer struct {
	runner *adk.Runner
}

func newEinoPeer(ctx context.Context) (*einoPeer, error) {
	child, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        einoChildName,
		Description: "echoes the request",
		Model:       einoChildModel{},
	})
	if err != nil {
		return nil, err
	}
	parent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "parent",
		Description: "delegates to the echo agent",
		Model:       einoParentModel{},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{
			Tools: []tool.BaseTool{adk.NewAgentTool(ctx, child)},
		}},
	})
	if err != nil {
		return nil, err
	}
	return &einoPeer{runner: adk.NewRunner(ctx, adk.RunnerConfig{Agent: parent})}, nil
}

// run drives one parent run to its end and returns the final answer: the
// content of the last message event, which must be the parent's own
// assistant text, not the tool result that precedes it.
func (p *einoPeer) run(ctx context.Context) (string, error) {
	iter := p.runner.Query(ctx, "echo hi")
	var last *schema.Message
	var runErr error
	for {
		ev, ok := iter.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			runErr = errors.Join(runErr, ev.Err)
			continue
		}
		if ev.Output == nil || ev.Output.MessageOutput == nil {
			continue
		}
		msg, err := ev.Output.MessageOutput.GetMessage()
		if err != nil {
			runErr = errors.Join(runErr, err)
			continue
		}
		last = msg
	}
	if runErr == nil && (last == nil || last.Role != schema.Assistant || len(last.ToolCalls) > 0) {
		runErr = fmt.Errorf("run ended on %v, want a final assistant answer", last)
	}
	if last == nil {
		return "", runErr
	}
	return last.Content, runErr
}

// einoRunOnce builds the peer and drives one parent run, for tests.
func einoRunOnce(ctx context.Context) (string, error) {
	p, err := newEinoPeer(ctx)
	if err != nil {
		return "", err
	}
	return p.run(ctx)
}

func checkEinoAnswer(answer string, err error) error {
	if err != nil {
		return err
	}
	if answer != "hi" {
		return fmt.Errorf("final answer %q, want %q", answer, "hi")
	}
	return nil
}

// EinoAgentTool is one parent run with one delegation on Eino's ADK: a
// parent ChatModelAgent whose scripted model calls one child agent wrapped
// with adk.NewAgentTool, the child's scripted model answering at once
// (built once; ADK compiles the agent's graph on every run).
func EinoAgentTool(ctx context.Context) (func() error, func(), error) {
	p, err := newEinoPeer(ctx)
	if err != nil {
		return nil, nil, err
	}
	return func() error { return checkEinoAnswer(p.run(ctx)) }, func() {}, nil
}

// einoCompiled is Eino's fastest configuration for the same work: its
// compose-level ReAct agent (flow/agent/react, its graph compiled once in
// NewAgent) whose one tool runs the child, a chain of the child's model
// compiled once. Nothing is persisted. With callbacks, a handler attached
// to both graphs keeps every node's output (a copy of each turn, as our
// memory store keeps) and counts it as delivered (as our listener does).
type einoCompiled struct {
	agent     *react.Agent
	callbacks []compose.Option
	kept      []callbacks.CallbackOutput
	events    int
}

func newEinoCompiled(ctx context.Context, withCallbacks bool) (*einoCompiled, error) {
	child, err := compose.NewChain[[]*schema.Message, *schema.Message]().AppendChatModel(einoChildModel{}).Compile(ctx)
	if err != nil {
		return nil, err
	}
	e := &einoCompiled{}
	if withCallbacks {
		h := callbacks.NewHandlerBuilder().OnEndFn(func(ctx context.Context, _ *callbacks.RunInfo, out callbacks.CallbackOutput) context.Context {
			e.kept = append(e.kept, out)
			e.events++
			return ctx
		}).Build()
		e.callbacks = []compose.Option{compose.WithCallbacks(h)}
	}
	e.agent, err = react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: einoParentModel{},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{&einoChildTool{child: child, opts: e.callbacks}}},
	})
	return e, err
}

// run is one parent run; its answer is the child's.
func (e *einoCompiled) run(ctx context.Context) (string, error) {
	e.kept = e.kept[:0]
	msg, err := e.agent.Generate(ctx, []*schema.Message{schema.UserMessage("echo hi")}, einoagent.WithComposeOptions(e.callbacks...))
	if err != nil {
		return "", err
	}
	return msg.Content, nil
}

// einoChildTool runs the child chain with the request its arguments carry
// (decoded, as our delegate tool decodes its own).
type einoChildTool struct {
	child compose.Runnable[[]*schema.Message, *schema.Message]
	opts  []compose.Option
}

func (*einoChildTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: einoChildName, Desc: "echoes the request", ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"request": {Type: schema.String, Required: true},
	})}, nil
}

func (t *einoChildTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct {
		Request string `json:"request"`
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "", err
	}
	out, err := t.child.Invoke(ctx, []*schema.Message{schema.UserMessage(in.Request)}, t.opts...)
	if err != nil {
		return "", err
	}
	return out.Content, nil
}

// EinoCompiled is one parent run with one delegation on Eino's fastest
// configuration (einoCompiled, no callbacks).
func EinoCompiled(ctx context.Context) (func() error, func(), error) {
	return einoCompiledOp(ctx, false)
}

// EinoCompiledCallbacks is EinoCompiled with a callback handler that keeps
// and counts every node's output.
func EinoCompiledCallbacks(ctx context.Context) (func() error, func(), error) {
	return einoCompiledOp(ctx, true)
}

func einoCompiledOp(ctx context.Context, withCallbacks bool) (func() error, func(), error) {
	e, err := newEinoCompiled(ctx, withCallbacks)
	if err != nil {
		return nil, nil, err
	}
	return func() error { return checkEinoAnswer(e.run(ctx)) }, func() {}, nil
}
