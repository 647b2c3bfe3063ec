// Package openai is an agent.Model over any OpenAI-compatible chat
// completions API (OpenAI, DeepSeek, vLLM, llama.cpp server, ...), built on
// github.com/openai/openai-go/v3.
//
// It is configured the ecosystem's way: Select reads OPENAI_BASE_URL,
// OPENAI_API_KEY and OPENAI_MODEL, and DEEPSEEK_API_KEY alone selects
// DeepSeek. Endpoints names several configurations so that a child's choice
// of model provider and model can be checked before it starts.
//
// Every call streams, reassembles text and tool-call deltas, and maps the
// finish reason and token usage onto agent.Response. Failed calls with a 429
// or 5xx status are retried with exponential backoff that honours
// Retry-After (the SDK's own retries are off, so these are the only ones);
// when the budget is spent the call fails with an *APIError. A request the
// endpoint is too slow to answer (no headers, no next chunk, no end within
// Config's time limits) is retried the same way and fails with an error
// naming the limit; an answer over Config's size limits fails with an
// error naming it. Cancelling the context aborts the HTTP request at once.
//
// The scripted model (package model/scripted) stays the embedded default;
// this client is used only when configured.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package openai
