package registry_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeEmbeddingExampleIsExampleService keeps the README's embedding
// example the code that ExampleService compiles and checks.
func TestReadmeEmbeddingExampleIsExampleService(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README has no Go code block")
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(source), "package registry_test\n\n")
	if strings.TrimSpace(block) != strings.TrimSpace(example) {
		t.Fatalf("README's example differs from example_test.go; copy the file below its package clause into the README")
	}
}
