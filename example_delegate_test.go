package subactor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/subactor/subactor"
	"github.com/subactor/subactor/internal/await"
	"github.com/subactor/subactor/model/openai"
	"github.com/subactor/subactor/subagent"
)

// An LLM that delegates (contract T1). The parent's model is given the "subagent" tool,
// and the model is chosen as cmd/node chooses it: from the environment
// (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL, or DEEPSEEK_API_KEY
// alone) or a -models file (Choice.ModelsFile). A program leaves Getenv
// nil to read its own environment; this example reads an empty one, so it
// runs offline on the embedded scripted model, whose "delegate" task calls
// the tool and answers what the child answered.
func Example_delegatingLLM() {
	ctx := context.Background()
	models, err := openai.Select(openai.Choice{Getenv: func(string) string { return "" }})
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := subactor.New(subactor.Config{Models: models})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	parent, err := rt.NewAgent(ctx, "parent")
	if err != nil {
		fmt.Println(err)
		return
	}
	res := parent.Run(ctx, []subagent.ContentBlock{subagent.Text("delegate echo hello")}, nil)
	fmt.Println(res.StopReason, subagent.TextOf(res.Output))
	// Output: completed the subagent says: hello
}

// Contract M1: the short path takes the node's model choice: a -models
// file's default endpoint drives the parent, whose options name it for its
// children to inherit. Nothing is contacted.
func TestM1_ShortPathTakesTheNodesModelChoice(t *testing.T) {
	models, err := openai.Select(openai.Choice{
		ModelsFile: "models.json",
		ModelsData: []byte(`{"endpoints": {"local": {"baseURL": "http://127.0.0.1:1/v1", "model": "m", "models": ["m", "n"]}}}`),
		Getenv:     func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := subactor.New(subactor.Config{Models: models})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	parent, err := rt.NewAgent(await.Ctx(t), "parent")
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	if c, ok := rt.Model.(*openai.Client); !ok || c.Model() != "m" {
		t.Fatalf("model %T %v, want the file's endpoint on m", rt.Model, rt.Model)
	}
	if o := parent.Options(); o.ModelProvider != "local" || o.Model != "m" {
		t.Fatalf("parent options %+v, want the default endpoint and model", o)
	}
}
