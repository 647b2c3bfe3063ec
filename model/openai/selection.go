package openai

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/internal/jsonv2"
)

// The environment variables fromEnv and Select read, besides the apiKeyEnv
// variables a models file names.
const (
	envBaseURL     = "OPENAI_BASE_URL"
	envAPIKey      = "OPENAI_API_KEY"
	envModel       = "OPENAI_MODEL"
	envDeepSeekKey = "DEEPSEEK_API_KEY"
)

// Choice is what a program's user says about the models to use: cmd/node's
// -models, -base-url, -model and time-limit flags, and the environment.
// Every field is optional.
type Choice struct {
	// ModelsFile names a models file (cmd/node's -models); ModelsData is
	// its content, read from ModelsFile when nil.
	ModelsFile string
	ModelsData []byte
	// BaseURL and Model take the place of OPENAI_BASE_URL and
	// OPENAI_MODEL; with a models file, Model is one of its default
	// endpoint's models and BaseURL is refused.
	BaseURL, Model string
	// HeaderTimeout, IdleTimeout and CallTimeout are the endpoints' time
	// limits where a models file gives none (Config's defaults when 0).
	HeaderTimeout, IdleTimeout, CallTimeout time.Duration
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
}

// Selection is a resolved Choice.
type Selection struct {
	// Top is the top-level agent's model, and the children's when their
	// options name no endpoint; nil when nothing is configured, for the
	// caller's default (the embedded scripted model).
	Top agent.Model
	// Endpoints, with a models file, are the named endpoints children may
	// be placed on (spawn.Config.Models); Endpoint and Model are the
	// default one, for the top agent's options so that children inherit
	// them and their descriptors record them.
	Endpoints       Endpoints
	Endpoint, Model string
}

// ErrChoice is matched by a Choice that cannot be used: flags, the
// environment or a models file that say something wrong. The error says
// what.
var ErrChoice = errors.New("openai: unusable model choice")

// choiceError is an ErrChoice error; its text is the message alone.
type choiceError struct{ msg string }

func (e *choiceError) Error() string { return e.msg }
func (e *choiceError) Unwrap() error { return ErrChoice }

func choiceErrorf(format string, args ...any) error {
	return &choiceError{msg: fmt.Sprintf(format, args...)}
}

// maxModelsFile bounds a models file Select reads itself.
const maxModelsFile = 1 << 20

// Select resolves c, in this order:
//
//   - a models file: its named endpoints, its default one for the top
//     agent (c.Model may pick another model of that endpoint);
//   - else the environment, with c.BaseURL and c.Model in place of
//     OPENAI_BASE_URL and OPENAI_MODEL: OPENAI_API_KEY or OPENAI_BASE_URL
//     configure an OpenAI-compatible endpoint (OpenAI's own when
//     OPENAI_BASE_URL is unset, with gpt-4o-mini unless OPENAI_MODEL
//     names another), or else DEEPSEEK_API_KEY selects DeepSeek
//     (deepseek-chat unless OPENAI_MODEL names another, JSON mode for
//     output schemas);
//   - else nothing: Selection.Top is nil.
//
// A key is only ever read from the environment, never from a Choice field
// or the file, so that it stays out of shell history and config files.
// The error matches ErrChoice, or is a file that cannot be read.
func Select(c Choice) (Selection, error) {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.ModelsFile != "" || c.ModelsData != nil {
		if c.BaseURL != "" {
			return Selection{}, choiceErrorf("-base-url cannot be used with -models: the file gives each endpoint's baseURL")
		}
		if c.ModelsData == nil {
			data, err := readModelsFile(c.ModelsFile)
			if err != nil {
				return Selection{}, err
			}
			c.ModelsData = data
		}
		return c.parseModels()
	}
	cfg, ok := fromEnv(func(k string) string {
		switch {
		case k == envBaseURL && c.BaseURL != "":
			return c.BaseURL
		case k == envModel && c.Model != "":
			return c.Model
		}
		return c.Getenv(k)
	})
	if !ok {
		if c.Model != "" {
			return Selection{}, choiceErrorf("-model %s needs an endpoint: set %s (and %s), or %s, or give -base-url or -models", c.Model, envBaseURL, envAPIKey, envDeepSeekKey)
		}
		return Selection{}, nil
	}
	c.limits(&cfg)
	top, err := New(cfg)
	switch {
	case errors.Is(err, ErrNoModel):
		return Selection{}, choiceErrorf("no model for %s: set %s or give -model", cfg.BaseURL, envModel)
	case err != nil:
		source := envBaseURL
		if c.BaseURL != "" {
			source = "-base-url"
		}
		return Selection{}, choiceErrorf("%s %q: %v", source, cfg.BaseURL, err)
	}
	return Selection{Top: top}, nil
}

// readModelsFile reads at most maxModelsFile bytes of path.
func readModelsFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-models: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxModelsFile+1))
	if err != nil {
		return nil, fmt.Errorf("-models: %w", err)
	}
	if len(data) > maxModelsFile {
		return nil, choiceErrorf("-models %s: larger than %d KiB, too large for a configuration file", path, maxModelsFile>>10)
	}
	return data, nil
}

// limits sets c's time limits on cfg.
func (c Choice) limits(cfg *Config) {
	cfg.HeaderTimeout, cfg.IdleTimeout, cfg.CallTimeout = c.HeaderTimeout, c.IdleTimeout, c.CallTimeout
}

// modelsFile is the JSON of a models file:
//
//	{"endpoints": {"NAME": {"baseURL": "...", "model": "...", "models": ["..."],
//	  "apiKeyEnv": "VAR", "schemaMode": "json_schema", "headerTimeout": "5m",
//	  "idleTimeout": "10m", "callTimeout": "1h"}}, "default": "NAME"}
//
// It is read strictly (jsonv2.Unmarshal): an unknown key, a key given
// twice or in another case, and a null are errors, so that a typo (or an
// "apiKey" that does not belong in a file) is not silently ignored and a
// second "baseURL" cannot silently change where a key is sent.
type modelsFile struct {
	Endpoints map[string]endpointJSON `json:"endpoints"`
	// Default names the top agent's endpoint; it may be left out when
	// there is only one.
	Default string `json:"default"`
}

// endpointJSON is one endpoint of a models file.
type endpointJSON struct {
	BaseURL string   `json:"baseURL"` // OpenAI's own when empty
	Model   string   `json:"model"`   // required
	Models  []string `json:"models"`  // the models children may choose; any when empty
	// APIKeyEnv names the environment variable holding the key; none
	// for a local server that takes no key.
	APIKeyEnv string `json:"apiKeyEnv"`
	// SchemaMode is how output schemas are asked for: json_schema (the
	// default), json_object (DeepSeek) or prompt.
	SchemaMode string `json:"schemaMode"`
	// HeaderTimeout, IdleTimeout and CallTimeout are the endpoint's time
	// limits as Go durations ("90s", "10m"); the Choice's, else Config's
	// defaults, when left out.
	HeaderTimeout string `json:"headerTimeout"`
	IdleTimeout   string `json:"idleTimeout"`
	CallTimeout   string `json:"callTimeout"`
}

// knownKeys is said with an unknown-key error.
const knownKeys = `top-level keys: endpoints, default; endpoint keys: baseURL, model, models, apiKeyEnv, schemaMode, headerTimeout, idleTimeout, callTimeout`

// parseModels makes the Selection of c's models file.
func (c Choice) parseModels() (Selection, error) {
	bad := func(format string, args ...any) error {
		return choiceErrorf("-models %s: %s", c.ModelsFile, fmt.Sprintf(format, args...))
	}
	var mf modelsFile
	if err := jsonv2.Unmarshal(c.ModelsData, &mf); err != nil {
		return Selection{}, bad("%s", decodeError(err))
	}
	if len(mf.Endpoints) == 0 {
		return Selection{}, bad(`no endpoints: give {"endpoints": {"NAME": {"baseURL": ..., "model": ...}}, "default": "NAME"}`)
	}
	names := slices.Sorted(maps.Keys(mf.Endpoints))
	eps := make(Endpoints, len(mf.Endpoints))
	for _, name := range names {
		ec := mf.Endpoints[name]
		if strings.TrimSpace(name) == "" {
			return Selection{}, bad("an endpoint has an empty name")
		}
		if !validSchemaMode(ec.SchemaMode) {
			return Selection{}, bad("endpoint %q: schemaMode %q is none of json_schema, json_object, prompt", name, ec.SchemaMode)
		}
		cfg := Config{BaseURL: ec.BaseURL, Model: ec.Model, Models: slices.Clone(ec.Models), OutputSchema: ec.SchemaMode}
		c.limits(&cfg)
		for _, l := range []struct {
			key, value string
			dst        *time.Duration
		}{{"headerTimeout", ec.HeaderTimeout, &cfg.HeaderTimeout}, {"idleTimeout", ec.IdleTimeout, &cfg.IdleTimeout}, {"callTimeout", ec.CallTimeout, &cfg.CallTimeout}} {
			if l.value == "" {
				continue
			}
			d, err := time.ParseDuration(l.value)
			if err != nil || d <= 0 {
				return Selection{}, bad("endpoint %q: %s %q is not a duration above 0 such as \"90s\" or \"10m\"", name, l.key, l.value)
			}
			*l.dst = d
		}
		if ec.APIKeyEnv != "" {
			if cfg.APIKey = c.Getenv(ec.APIKeyEnv); cfg.APIKey == "" {
				return Selection{}, bad("endpoint %q: its key variable %s (apiKeyEnv) is not set in the environment", name, ec.APIKeyEnv)
			}
		}
		// New contacts nothing: it checks the model and the base URL now,
		// before anything runs.
		if _, err := New(cfg); err != nil {
			return Selection{}, bad("endpoint %q: %v", name, err)
		}
		eps[name] = cfg
	}
	def := mf.Default
	if def == "" {
		if len(names) > 1 {
			return Selection{}, bad(`no "default": name the top agent's endpoint (configured: %s)`, strings.Join(names, ", "))
		}
		def = names[0]
	}
	top, err := eps.Lookup(def, c.Model)
	var unknownEndpoint *unknownEndpointError
	var unknownModel *unknownModelError
	switch {
	case errors.As(err, &unknownEndpoint):
		return Selection{}, bad("default endpoint %q is not configured (configured: %s)", def, strings.Join(names, ", "))
	case errors.As(err, &unknownModel):
		return Selection{}, choiceErrorf("-model %s: endpoint %q of %s does not offer it (offered: %s)", c.Model, def, c.ModelsFile, strings.Join(unknownModel.Known, ", "))
	case err != nil:
		return Selection{}, bad("%v", err)
	}
	model := c.Model
	if model == "" {
		model = eps[def].Model
	}
	return Selection{Top: top, Endpoints: eps, Endpoint: def, Model: model}, nil
}

// decodeError is what a models file's decoding fault says, an unknown key
// with the keys there are.
func decodeError(err error) string {
	var jerr *jsonv2.Error
	if !errors.As(err, &jerr) || jerr.Problem != jsonv2.Unknown {
		return err.Error()
	}
	hint := knownKeys
	if strings.EqualFold(jerr.Name, "apiKey") {
		hint = "keys are read from the environment: name the variable with apiKeyEnv; " + hint
	}
	return fmt.Sprintf("unknown key %q %s (keys are case-sensitive; %s)", jerr.Name, jsonv2.Where(jerr.Pointer), hint)
}
