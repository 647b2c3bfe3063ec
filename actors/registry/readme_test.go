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
	// The README's first Go block is the root package's short path, so
	// find this one by the function it shows.
	var block string
	for _, part := range strings.Split(string(readme), "```go\n")[1:] {
		if b, _, _ := strings.Cut(part, "```"); strings.Contains(b, "func ExampleService()") {
			block = b
			break
		}
	}
	if block == "" {
		t.Fatal("README has no Go code block with ExampleService")
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
