package openai_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/subactor/subactor/model/openai"
)

// Contract M1: Select is cmd/node's model choice for any program: nothing
// configured selects nothing (the caller's embedded default), the
// environment selects one endpoint, and a models file, read from its path,
// selects its named endpoints and default; bad choices are ErrChoice errors.
// Nothing is contacted.
func TestM1_SelectChoosesAsTheNodeDoes(t *testing.T) {
	none := func(string) string { return "" }
	if sel, err := openai.Select(openai.Choice{Getenv: none}); err != nil || sel.Top != nil || sel.Endpoints != nil {
		t.Fatalf("nothing configured: %+v, %v", sel, err)
	}
	env := func(k string) string { return map[string]string{openai.EnvDeepSeekKey: "sk"}[k] }
	if sel, err := openai.Select(openai.Choice{Getenv: env}); err != nil || sel.Top.(*openai.Client).Model() != openai.DefaultDeepSeekModel {
		t.Fatalf("DEEPSEEK_API_KEY alone: %+v, %v", sel, err)
	}
	file := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(file, []byte(`{"endpoints": {"a": {"baseURL": "http://127.0.0.1:1/v1", "model": "m"}, "b": {"model": "n"}}, "default": "a"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sel, err := openai.Select(openai.Choice{ModelsFile: file, Getenv: none})
	if err != nil || sel.Endpoint != "a" || sel.Model != "m" || len(sel.Endpoints) != 2 || sel.Top.(*openai.Client).Model() != "m" {
		t.Fatalf("models file: %+v, %v", sel, err)
	}
	for _, c := range []struct {
		choice openai.Choice
		msg    string
	}{
		{openai.Choice{ModelsFile: file, BaseURL: "http://127.0.0.1:1/v1"}, "-base-url cannot be used with -models"},
		{openai.Choice{Model: "gpt-x", Getenv: none}, "-model gpt-x needs an endpoint"},
		{openai.Choice{ModelsFile: "m.json", ModelsData: []byte(`{"endpoints": {"a": {"model": "m", "Model": "n"}}}`), Getenv: none}, `unknown key "Model" at /endpoints/a`},
	} {
		if _, err := openai.Select(c.choice); !errors.Is(err, openai.ErrChoice) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want an ErrChoice error saying %q", c.choice, err, c.msg)
		}
	}
}
