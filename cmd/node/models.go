package main

import (
	"fmt"
	"time"

	"github.com/subactor/subactor/actors/providers/spawn"
	"github.com/subactor/subactor/agent"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/model/scripted"
)

// Environment variables the model configuration reads (openai.Select),
// named here so that the help and the tests name the same ones.
const (
	envBaseURL     = "OPENAI_BASE_URL"
	envAPIKey      = "OPENAI_API_KEY"
	envModel       = "OPENAI_MODEL"
	envDeepSeekKey = "DEEPSEEK_API_KEY"
)

// modelError is a -models file the node cannot read as a configuration
// (not a regular file, too large). Like every model configuration Select
// refuses, it matches openai.ErrChoice and exits with exitUsage.
type modelError struct{ msg string }

func (e *modelError) Error() string { return e.msg }
func (e *modelError) Unwrap() error { return openai.ErrChoice }

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

// resolveModels resolves the run's model configuration with openai.Select
// (the -models file, else the environment with -base-url and -model in
// place of OPENAI_BASE_URL and OPENAI_MODEL), else the embedded scripted
// model. The -models file is read by readConfigFile. getenv is os.Getenv
// outside tests. The error matches openai.ErrChoice, or is a file that
// cannot be read.
func resolveModels(o options, getenv func(string) string) (models, error) {
	c := o.choice(getenv)
	if o.modelsFile != "" && o.baseURL == "" { // with -base-url, Select refuses the pair unread
		data, err := readConfigFile("-models", o.modelsFile, modelErrorf)
		if err != nil {
			return models{}, err
		}
		c.ModelsData = data
	}
	return selectModels(c)
}

// parseModels makes the models of the -models file path, which holds data;
// model, when set, is the top agent's model on the default endpoint
// instead of the endpoint's own.
func parseModels(path string, data []byte, model string, limits timeLimits, getenv func(string) string) (models, error) {
	c := options{modelsFile: path, model: model, limits: limits}.choice(getenv)
	c.ModelsData = data
	return selectModels(c)
}

// choice is o's model flags as an openai.Choice.
func (o options) choice(getenv func(string) string) openai.Choice {
	return openai.Choice{
		ModelsFile: o.modelsFile, BaseURL: o.baseURL, Model: o.model,
		HeaderTimeout: o.limits.header, IdleTimeout: o.limits.idle, CallTimeout: o.limits.call,
		Getenv: getenv,
	}
}

// selectModels resolves c, the embedded scripted model when it selects
// none.
func selectModels(c openai.Choice) (models, error) {
	sel, err := openai.Select(c)
	if err != nil {
		return models{}, err
	}
	if sel.Top == nil {
		return models{top: scripted.New()}, nil
	}
	return models{top: sel.Top, endpoints: sel.Endpoints, endpoint: sel.Endpoint, name: sel.Model, real: true}, nil
}

func modelErrorf(format string, args ...any) error {
	return &modelError{msg: fmt.Sprintf(format, args...)}
}

// timeLimits are the model endpoints' time limits the flags give; 0 leaves
// openai's default.
type timeLimits struct {
	header, idle, call time.Duration
}
