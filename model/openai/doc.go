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
// Retry-After; when the budget is spent the call fails with an *APIError.
// A request the endpoint is too slow to answer (no headers, no next chunk,
// no end within Config's time limits) is retried the same way and fails
// with an error naming the limit; an answer over Config's size limits
// fails with an error naming it. Each retry is told to the request's
// OnRetry before its wait. Cancelling the context aborts the HTTP request
// at once.
//
// The waits are github.com/cenkalti/backoff/v5's ExponentialBackOff; the
// retry loop around them is ours, and the SDK's own retries are off,
// because neither the SDK's nor backoff.Retry does what the loop must:
// the SDK retries only until the response headers, so a stream that
// stalls or passes the call limit mid-answer would fail at once, and it
// tells nobody of a retry; backoff.Retry ends with its own RetryAfterError
// instead of the endpoint's *APIError when the last attempt asked for a
// wait, and its timer cannot be replaced, which the tests that pin
// Retry-After waits of seconds need so as not to sleep them.
//
// The scripted model (package model/scripted) stays the embedded default;
// this client is used only when configured.
//
// Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md
package openai
