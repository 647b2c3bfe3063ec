package openai

// Names the tests reach that are not API.
const DefaultMaxEventBytes = defaultMaxEventBytes

// Retryable says whether a call retries e's status.
func Retryable(e *APIError) bool { return e.retryable() }
