package openai

import (
	"context"
	"time"
)

// Names the tests reach that are not API.
const DefaultMaxEventBytes = defaultMaxEventBytes

// Retryable says whether a call retries e's status.
func Retryable(e *APIError) bool { return e.retryable() }

// SetSleep makes cfg's client wait with sleep (nil: the real clock).
func SetSleep(cfg *Config, sleep func(ctx context.Context, d time.Duration) error) { cfg.sleep = sleep }

// SetNow makes cfg's client tell the time with now (nil: the real clock).
func SetNow(cfg *Config, now func() time.Time) { cfg.now = now }

// The environment's defaults, for the tests of fromEnv and Select.
const (
	OpenAIBaseURL        = openAIBaseURL
	DeepSeekBaseURL      = deepSeekBaseURL
	DefaultOpenAIModel   = defaultOpenAIModel
	DefaultDeepSeekModel = defaultDeepSeekModel
	EnvDeepSeekKey       = envDeepSeekKey
)

// FromEnv exposes fromEnv to the external tests.
var FromEnv = fromEnv

// The lookup errors, for the tests that read what they name.
type (
	UnknownEndpointError = unknownEndpointError
	UnknownModelError    = unknownModelError
)

// The stream's typed errors, for the tests that read them.
type (
	ProtocolError = protocolError
	TimeoutError  = timeoutError
	TooLargeError = tooLargeError
)
