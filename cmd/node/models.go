package main

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/model/scripted"
)

// Environment variables the model configuration reads, besides the
// apiKeyEnv variables a -models file names. openai.FromEnv reads them; they
// are listed here so that the help and the tests name the same ones.
const (
	envBaseURL     = "OPENAI_BASE_URL"
	envAPIKey      = "OPENAI_API_KEY"
	envModel       = "OPENAI_MODEL"
	envDeepSeekKey = "DEEPSEEK_API_KEY"
)

// modelError is a model configuration the node cannot use: flags, the
// environment or a -models file that say something wrong. It exits with
// exitUsage.
type modelError struct{ msg string }

func (e *modelError) Error() string { return e.msg }

func modelErrorf(format string, args ...any) error {
	return &modelError{msg: fmt.Sprintf(format, args...)}
}

// models is the resolved model configuration of a run.
type models struct {
	// top is the top-level agent's model, and the children's when their
	// options name no endpoint.
	top agent.Model
	// endpoints, with -models, are the named endpoints children may be
	// placed on (spawn.Config.Models); endpoint and model are the default
	// one, set as the top agent's options so that children inherit them
	// and their descriptors record them.
	endpoints      openai.Endpoints
	endpoint, name string
	// real is false on the embedded scripted model.
	real bool
}

// spawnModels is what spawn.Config.Models gets: nil without -models, so
// that a child naming an endpoint is refused as with no endpoints at all.
func (m models) spawnModels() spawn.Models {
	if m.endpoints == nil {
		return nil
	}
	return m.endpoints
}

// resolveModels resolves the run's model configuration, in this order:
//
//   - -models FILE: the named endpoints of the file, its default one for the
//     top agent (-model may pick another model of that endpoint; -base-url
//     is refused: the file says where each endpoint is);
//   - else the environment, through openai.FromEnv: OPENAI_BASE_URL,
//     OPENAI_API_KEY and OPENAI_MODEL, or DEEPSEEK_API_KEY alone; -base-url
//     and -model take the place of OPENAI_BASE_URL and OPENAI_MODEL;
//   - else the embedded scripted model.
//
// A key is only ever read from the environment, never from a flag or the
// file, so that it stays out of shell history and config files. getenv is
// os.Getenv outside tests. The error is a *modelError, or a file that
// cannot be read.
func resolveModels(o options, getenv func(string) string) (models, error) {
	if o.modelsFile != "" {
		if o.baseURL != "" {
			return models{}, modelErrorf("-base-url cannot be used with -models: the file gives each endpoint's baseURL")
		}
		return fileModels(o.modelsFile, o.model, o.limits, getenv)
	}
	cfg, ok := openai.FromEnv(func(k string) string {
		switch {
		case k == envBaseURL && o.baseURL != "":
			return o.baseURL
		case k == envModel && o.model != "":
			return o.model
		}
		return getenv(k)
	})
	if !ok {
		if o.model != "" {
			return models{}, modelErrorf("-model %s needs an endpoint: set %s (and %s), or %s, or give -base-url or -models", o.model, envBaseURL, envAPIKey, envDeepSeekKey)
		}
		return models{top: scripted.New()}, nil
	}
	o.limits.apply(&cfg)
	c, err := openai.New(cfg)
	switch {
	case errors.Is(err, openai.ErrNoModel):
		return models{}, modelErrorf("no model for %s: set %s or give -model", cfg.BaseURL, envModel)
	case err != nil:
		source := envBaseURL
		if o.baseURL != "" {
			source = "-base-url"
		}
		return models{}, modelErrorf("%s %q: %v", source, cfg.BaseURL, err)
	}
	return models{top: c, real: true}, nil
}

// modelsConfig is the JSON of a -models file:
//
//	{"endpoints": {"NAME": {"baseURL": "...", "model": "...", "models": ["..."],
//	  "apiKeyEnv": "VAR", "schemaMode": "json_schema", "headerTimeout": "5m",
//	  "idleTimeout": "10m", "callTimeout": "1h"}}, "default": "NAME"}
//
// Decoding is as strict as -config's (see strictJSON): an unknown key, a
// key given twice or in another case, and a null are errors, so that a
// typo (or an "apiKey" that does not belong in a file) is not silently
// ignored and a second "baseURL" cannot silently change where a key is
// sent.
type modelsConfig struct {
	Endpoints map[string]endpointConfig `json:"endpoints"`
	// Default names the top agent's endpoint; it may be left out when
	// there is only one.
	Default string `json:"default"`
}

// endpointConfig is one endpoint of a -models file.
type endpointConfig struct {
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
	// limits (openai.Config's) as Go durations ("90s", "10m"); the
	// -header-timeout, -idle-timeout and -call-timeout flags, else the
	// defaults, when left out.
	HeaderTimeout string `json:"headerTimeout"`
	IdleTimeout   string `json:"idleTimeout"`
	CallTimeout   string `json:"callTimeout"`
}

// knownKeys is said with an unknown-key error.
const knownKeys = `top-level keys: endpoints, default; endpoint keys: baseURL, model, models, apiKeyEnv, schemaMode, headerTimeout, idleTimeout, callTimeout`

var schemaModes = map[string]openai.SchemaMode{
	"":            openai.SchemaJSONSchema,
	"json_schema": openai.SchemaJSONSchema,
	"json_object": openai.SchemaJSONObject,
	"prompt":      openai.SchemaPrompt,
}

// timeLimits are the model endpoints' time limits the flags give; 0 leaves
// openai's default.
type timeLimits struct {
	header, idle, call time.Duration
}

// apply sets the limits on cfg.
func (l timeLimits) apply(cfg *openai.Config) {
	cfg.HeaderTimeout, cfg.IdleTimeout, cfg.CallTimeout = l.header, l.idle, l.call
}

// errNull is a null in a -models file: it would leave its key unset
// without saying so.
var errNull = errors.New("null")

// strictJSON decodes a -models file: the library refuses a key given twice
// and matches keys case-sensitively by default; unknown keys and nulls are
// refused here.
var strictJSON = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ any) error {
		if dec.PeekKind() == 'n' {
			return errNull
		}
		return errors.ErrUnsupported // decode as usual
	})),
)

// fileModels reads a -models file (see readConfigFile and parseModels).
func fileModels(path, model string, limits timeLimits, getenv func(string) string) (models, error) {
	data, err := readConfigFile("-models", path, modelErrorf)
	if err != nil {
		return models{}, err
	}
	return parseModels(path, data, model, limits, getenv)
}

// parseModels makes the models of the -models file path, which holds data;
// model, when set, is the top agent's model on the default endpoint
// instead of the endpoint's own, and limits are the time limits of the
// endpoints that give none. Its errors are *modelError.
func parseModels(path string, data []byte, model string, limits timeLimits, getenv func(string) string) (models, error) {
	bad := func(format string, args ...any) error {
		return modelErrorf("-models %s: %s", path, fmt.Sprintf(format, args...))
	}
	var mc modelsConfig
	if err := json.Unmarshal(data, &mc, strictJSON); err != nil {
		return models{}, bad("%s", decodeError(err))
	}
	if len(mc.Endpoints) == 0 {
		return models{}, bad(`no endpoints: give {"endpoints": {"NAME": {"baseURL": ..., "model": ...}}, "default": "NAME"}`)
	}
	names := make([]string, 0, len(mc.Endpoints))
	for name := range mc.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	eps := make(openai.Endpoints, len(mc.Endpoints))
	for _, name := range names {
		ec := mc.Endpoints[name]
		if strings.TrimSpace(name) == "" {
			return models{}, bad("an endpoint has an empty name")
		}
		mode, ok := schemaModes[ec.SchemaMode]
		if !ok {
			return models{}, bad("endpoint %q: schemaMode %q is none of json_schema, json_object, prompt", name, ec.SchemaMode)
		}
		cfg := openai.Config{BaseURL: ec.BaseURL, Model: ec.Model, Models: slices.Clone(ec.Models), OutputSchema: mode}
		limits.apply(&cfg)
		for _, l := range []struct {
			key, value string
			dst        *time.Duration
		}{{"headerTimeout", ec.HeaderTimeout, &cfg.HeaderTimeout}, {"idleTimeout", ec.IdleTimeout, &cfg.IdleTimeout}, {"callTimeout", ec.CallTimeout, &cfg.CallTimeout}} {
			if l.value == "" {
				continue
			}
			d, err := time.ParseDuration(l.value)
			if err != nil || d <= 0 {
				return models{}, bad("endpoint %q: %s %q is not a duration above 0 such as \"90s\" or \"10m\"", name, l.key, l.value)
			}
			*l.dst = d
		}
		if ec.APIKeyEnv != "" {
			if cfg.APIKey = getenv(ec.APIKeyEnv); cfg.APIKey == "" {
				return models{}, bad("endpoint %q: its key variable %s (apiKeyEnv) is not set in the environment", name, ec.APIKeyEnv)
			}
		}
		// New contacts nothing: it checks the model and the base URL now,
		// before anything runs.
		if _, err := openai.New(cfg); err != nil {
			return models{}, bad("endpoint %q: %v", name, err)
		}
		eps[name] = cfg
	}
	def := mc.Default
	if def == "" {
		if len(names) > 1 {
			return models{}, bad(`no "default": name the top agent's endpoint (configured: %s)`, strings.Join(names, ", "))
		}
		def = names[0]
	}
	top, err := eps.Lookup(def, model)
	var unknownEndpoint *openai.UnknownEndpointError
	var unknownModel *openai.UnknownModelError
	switch {
	case errors.As(err, &unknownEndpoint):
		return models{}, bad("default endpoint %q is not configured (configured: %s)", def, strings.Join(names, ", "))
	case errors.As(err, &unknownModel):
		return models{}, modelErrorf("-model %s: endpoint %q of %s does not offer it (offered: %s)", model, def, path, strings.Join(unknownModel.Known, ", "))
	case err != nil:
		return models{}, bad("%v", err)
	}
	if model == "" {
		model = eps[def].Model
	}
	return models{top: top, endpoints: eps, endpoint: def, name: model, real: true}, nil
}

// decodeError says plainly what is wrong where in a -models file.
func decodeError(err error) string {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return fmt.Sprintf("key %q is given twice %s: give each key once", syn.JSONPointer.LastToken(), where(syn.JSONPointer.Parent()))
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &sem):
		key := sem.JSONPointer.LastToken()
		hint := knownKeys
		if strings.EqualFold(key, "apiKey") {
			hint = "keys are read from the environment: name the variable with apiKeyEnv; " + hint
		}
		return fmt.Sprintf("unknown key %q %s (keys are case-sensitive; %s)", key, where(sem.JSONPointer.Parent()), hint)
	case errors.Is(err, errNull) && errors.As(err, &sem):
		return fmt.Sprintf("null %s: give a value or leave the key out", where(sem.JSONPointer))
	case errors.As(err, &sem) && sem.GoType != nil && sem.JSONKind != 0 && sem.Err == nil:
		return fmt.Sprintf("a JSON %s %s, where %s belongs", sem.JSONKind, where(sem.JSONPointer), goKind(sem.GoType))
	case errors.As(err, &syn):
		return fmt.Sprintf("not valid JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	}
	return err.Error()
}

// where names a place in the file by its JSON pointer.
func where(p jsontext.Pointer) string {
	if p == "" {
		return "at the top level"
	}
	return "at " + string(p)
}

// goKind says what JSON a Go type of modelsConfig is read from.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	}
	return "an object"
}
