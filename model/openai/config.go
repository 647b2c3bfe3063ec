package openai

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/subactor/subactor/agent"
)

// Well-known endpoints.
const (
	openAIBaseURL   = "https://api.openai.com/v1"
	deepSeekBaseURL = "https://api.deepseek.com/v1"
	// defaultOpenAIModel is the model used on OpenAI's own endpoint when
	// OPENAI_MODEL is unset.
	defaultOpenAIModel = "gpt-4o-mini"
	// defaultDeepSeekModel is the model DEEPSEEK_API_KEY selects.
	defaultDeepSeekModel = "deepseek-chat"
)

// Config is one endpoint. The zero values of the optional fields are
// sensible defaults.
type Config struct {
	BaseURL string // OpenAI's own (https://api.openai.com/v1) when empty
	APIKey  string // no Authorization header when empty (local servers)
	Model   string // required
	// Models, when not empty, are the models a Lookup may choose on this
	// endpoint; Model need not be among them.
	Models []string

	// OutputSchema says how structured output is asked for:
	// "json_schema" (the default when empty) sends response_format
	// json_schema with the schema, as OpenAI, vLLM and llama.cpp server
	// understand it; "json_object" sends JSON mode and puts the schema in
	// the system prompt, for servers that only know JSON mode (DeepSeek);
	// "prompt" only puts it in the system prompt. StrictSchema sets
	// json_schema's strict flag (OpenAI then insists that every property
	// be required and additionalProperties false, which not every schema
	// satisfies, so it is off by default).
	OutputSchema string
	StrictSchema bool

	// HTTPClient makes the requests; http.DefaultClient when nil. Give it
	// no overall Timeout: a streamed answer can take minutes, and the
	// caller's context bounds the call.
	HTTPClient *http.Client

	// MaxAttempts bounds the HTTP requests of one Generate call (4 when
	// 0; 1 means no retries). Only 429 and 5xx statuses are retried.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled before each
	// next one up to MaxBackoff, each with ±50% jitter (500ms and 30s
	// when 0). A
	// Retry-After header replaces it; one longer than MaxRetryAfter (60s
	// when 0) ends the call with its *APIError instead of waiting.
	Backoff, MaxBackoff, MaxRetryAfter time.Duration
	// HeaderTimeout bounds the wait for one request's response headers,
	// IdleTimeout the wait for each chunk of its stream after the headers
	// or the chunk before (keep-alive comments do not count: they show a
	// live connection, not progress), and CallTimeout the whole request,
	// from sending it to the stream's end. Past one, the request ends
	// with an error naming the limit, retried like a 5xx status. The defaults
	// (DefaultHeaderTimeout, DefaultIdleTimeout, DefaultCallTimeout when
	// 0) leave room for slow reasoning models and local servers that
	// read a long prompt before they answer.
	HeaderTimeout, IdleTimeout, CallTimeout time.Duration
	// MaxReplyBytes bounds the raw bytes of one answer's body, and
	// MaxEventBytes those of one event of its stream, so that a hostile
	// or broken server cannot exhaust memory: past either the answer
	// ends with an error naming the limit (16 MiB and 4 MiB when 0;
	// MaxEventBytes is at most 32 MiB, the
	// longest line the SDK's stream reader takes).
	MaxReplyBytes, MaxEventBytes int

	// sleep waits d or until ctx ends, returning ctx's error then; now
	// tells the time an HTTP-date Retry-After is measured from. Tests
	// set both (export_test.go); nil means the real clock.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
}

// Defaults of Config's limits.
const (
	DefaultHeaderTimeout = 5 * time.Minute
	DefaultIdleTimeout   = 10 * time.Minute
	DefaultCallTimeout   = time.Hour
	defaultMaxReplyBytes = 16 << 20
	defaultMaxEventBytes = 4 << 20
)

// fromEnv reads an endpoint from the environment through getenv (os.Getenv
// in production):
//
//   - OPENAI_API_KEY or OPENAI_BASE_URL configure an OpenAI-compatible
//     endpoint (OpenAI's own when OPENAI_BASE_URL is unset); OPENAI_MODEL
//     names the model, defaultOpenAIModel on OpenAI's own endpoint (on any
//     other, a missing OPENAI_MODEL makes New fail with ErrNoModel).
//   - Otherwise DEEPSEEK_API_KEY selects DeepSeek (deepSeekBaseURL,
//     defaultDeepSeekModel unless OPENAI_MODEL says otherwise, JSON mode
//     for output schemas).
//
// ok is false when neither is set: the caller keeps its default model.
func fromEnv(getenv func(string) string) (cfg Config, ok bool) {
	key, base, model := getenv(envAPIKey), getenv(envBaseURL), getenv(envModel)
	switch {
	case key != "" || base != "":
		cfg = Config{BaseURL: base, APIKey: key, Model: model}
		if base == "" {
			cfg.BaseURL = openAIBaseURL
		}
		if model == "" && strings.TrimSuffix(cfg.BaseURL, "/") == openAIBaseURL {
			cfg.Model = defaultOpenAIModel
		}
		return cfg, true
	case getenv(envDeepSeekKey) != "":
		cfg = Config{BaseURL: deepSeekBaseURL, APIKey: getenv(envDeepSeekKey), Model: model, OutputSchema: schemaJSONObject}
		if model == "" {
			cfg.Model = defaultDeepSeekModel
		}
		return cfg, true
	}
	return Config{}, false
}

// Endpoints names several endpoints, so that a child can choose its model
// provider and model by name. Lookup only reads it: it is safe for
// concurrent use as long as nobody writes the map.
type Endpoints map[string]Config

// Lookup returns a model for the named endpoint, on model when it is not
// empty (else the endpoint's own Model). An unknown name or a model the
// endpoint does not offer is an error naming what is configured, so that
// a child's options can be refused at Start.
func (e Endpoints) Lookup(provider, model string) (agent.Model, error) {
	cfg, ok := e[provider]
	if !ok {
		return nil, &unknownEndpointError{Provider: provider, Known: slices.Sorted(maps.Keys(e))}
	}
	if model != "" && model != cfg.Model {
		if len(cfg.Models) > 0 && !slices.Contains(cfg.Models, model) {
			return nil, &unknownModelError{Provider: provider, Model: model, Known: slices.Clone(cfg.Models)}
		}
		cfg.Model = model
	}
	c, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("openai: endpoint %q: %w", provider, err)
	}
	return c, nil
}

// unknownEndpointError is a lookup of an endpoint name that is not
// configured.
type unknownEndpointError struct {
	Provider string
	Known    []string // the configured names, sorted
}

func (e *unknownEndpointError) Error() string {
	return fmt.Sprintf("openai: unknown model provider %q (configured: %s)", e.Provider, strings.Join(e.Known, ", "))
}

// unknownModelError is a lookup of a model an endpoint does not offer.
type unknownModelError struct {
	Provider, Model string
	Known           []string
}

func (e *unknownModelError) Error() string {
	return fmt.Sprintf("openai: model provider %q does not offer model %q (offered: %s)", e.Provider, e.Model, strings.Join(e.Known, ", "))
}
