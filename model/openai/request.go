package openai

import (
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/subagent"
)

// schemaName names the output schema in response_format; the API wants
// [a-zA-Z0-9_-]+.
const schemaName = "output"

// params maps req onto a chat completions request for c's model.
func (c *Client) params(req agent.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{
		Model: c.cfg.Model,
		// Usage arrives in a final chunk only when asked for.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.MaxTokens > 0 {
		// max_tokens rather than max_completion_tokens: every compatible
		// server knows it (DeepSeek, vLLM and llama.cpp among them).
		p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
	}

	system := req.System
	if len(req.OutputSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(req.OutputSchema, &schema); err != nil {
			return p, fmt.Errorf("openai: output schema: %w", err)
		}
		switch c.cfg.OutputSchema {
		case "", schemaJSONSchema:
			p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   schemaName,
					Schema: schema,
					Strict: param.NewOpt(c.cfg.StrictSchema),
				},
			}
		case schemaJSONObject:
			p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
			system = withSchema(system, req.OutputSchema)
		default:
			system = withSchema(system, req.OutputSchema)
		}
	}
	if system != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(system))
	}
	for i, m := range req.Messages {
		msg, err := message(m)
		if err != nil {
			return p, fmt.Errorf("openai: message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, msg)
	}
	for _, t := range req.Tools {
		tool, err := tool(t)
		if err != nil {
			return p, fmt.Errorf("openai: tool %q: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

// withSchema asks for the answer as JSON matching schema in the system
// prompt. JSON mode (DeepSeek) requires the word "json" in the prompt.
func withSchema(system string, schema json.RawMessage) string {
	if system != "" {
		system += "\n\n"
	}
	return system + "Answer with a single JSON object, and nothing else, that matches this JSON schema:\n" + string(schema)
}

func message(m agent.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	text := subagent.TextOf(m.Content)
	switch m.Role {
	case agent.User:
		return sdk.UserMessage(text), nil
	case agent.ToolRole:
		// The chat API has no error flag on a tool result: the text says so.
		return sdk.ToolMessage(text, m.ToolCallID), nil
	case agent.Assistant:
		a := sdk.ChatCompletionAssistantMessageParam{}
		if text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(text)
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: string(tc.Args),
					},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

func tool(t agent.ToolSpec) (sdk.ChatCompletionToolUnionParam, error) {
	params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if len(t.Parameters) > 0 {
		params = nil
		if err := json.Unmarshal(t.Parameters, &params); err != nil {
			return sdk.ChatCompletionToolUnionParam{}, fmt.Errorf("parameters: %w", err)
		}
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
	if t.Description != "" {
		def.Description = param.NewOpt(t.Description)
	}
	return sdk.ChatCompletionFunctionTool(def), nil
}

// The ways Config.OutputSchema may ask for structured output.
const (
	schemaJSONSchema = "json_schema"
	schemaJSONObject = "json_object"
	schemaPrompt     = "prompt"
)

func validSchemaMode(m string) bool {
	switch m {
	case "", schemaJSONSchema, schemaJSONObject, schemaPrompt:
		return true
	}
	return false
}
