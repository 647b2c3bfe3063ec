package openai_test

import (
	"context"
	"fmt"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/testkit/openaitest"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

// A child's model provider and model are looked up by name; the endpoint
// here is a scripted server standing in for DeepSeek, vLLM or OpenAI.
func ExampleEndpoints_Lookup() {
	srv, err := openaitest.Listen("127.0.0.1:0", openaitest.Script{Steps: []openaitest.Step{
		{Text: "Hello from the endpoint.", ChunkSize: 5, Usage: &openaitest.Usage{PromptTokens: 12, CompletionTokens: 5}},
	}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	endpoints := openai.Endpoints{
		// In production, openai.Select reads them from the environment and a models file.
		"local": {BaseURL: srv.URL, Model: "qwen3-coder", HTTPClient: srv.Client()},
	}
	if _, err := endpoints.Lookup("elsewhere", ""); err != nil {
		fmt.Println(err)
	}
	model, err := endpoints.Lookup("local", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := model.Generate(context.Background(), agent.Request{
		Messages: []agent.Message{{Role: agent.User, Content: []subagent.ContentBlock{subagent.Text("hi")}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(subagent.TextOf(resp.Message.Content), resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// openai: unknown model provider "elsewhere" (configured: local)
	// Hello from the endpoint. completed 12 5
}
