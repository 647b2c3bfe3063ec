// Package openaitest is a scripted OpenAI-compatible server for tests.
//
// It speaks the real wire format of POST /v1/chat/completions (a JSON
// chat.completion, or server-sent events: `data: {chunk}` lines ending with
// `data: [DONE]`) and GET /v1/models, so that our own client and third-party
// agents (qwen-code and others) can be pointed at it through
// OPENAI_BASE_URL.
//
// The server follows a script: each chat request takes the next Step, which
// is either a reply (text, refusal and tool calls, split into as many chunks
// as asked, with a finish reason and usage) or a fault (an HTTP status with
// a body and Retry-After, a malformed body, a connection dropped mid-stream,
// a stall until the client cancels). Every request is recorded, decoded,
// with whether the client cancelled it, and the server keeps the peak number
// of requests in flight at once.
//
// Instead of a script, a test may give a responder (NewResponder): a
// function that computes each request's step from the request, for clients
// whose requests a fixed order cannot foresee.
//
// NewServer starts one for a test; Listen starts one on a chosen address for
// a separate process (see cmd/openaitest).
package openaitest
