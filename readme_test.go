package subactor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestReadmeExamplesAreTheCheckedOnes keeps the README's examples the
// code that go test compiles and checks: the short path (ExampleNew) and
// runs under a platform's own actors (ExampleSpawn).
func TestReadmeExamplesAreTheCheckedOnes(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ name, file string }{
		{"ExampleNew", "subactor_test.go"},
		{"ExampleSpawn", "actors/run/example_test.go"},
	} {
		block, ok := goBlockWith(string(readme), "func "+ex.name+"()")
		if !ok {
			t.Fatalf("README has no Go code block with %s", ex.name)
		}
		src, err := os.ReadFile(ex.file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		var example string
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == ex.name {
				// With its doc comment; positions are 1-based offsets here.
				example = string(src[fn.Doc.Pos()-1 : fn.End()-1])
			}
		}
		if strings.TrimSpace(block) != strings.TrimSpace(example) {
			t.Errorf("README's %s differs from %s's; copy it with its doc comment into the README", ex.name, ex.file)
		}
	}
}

// goBlockWith returns the first ```go block of md that contains s.
func goBlockWith(md, s string) (string, bool) {
	for _, part := range strings.Split(md, "```go\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, s) {
			return block, true
		}
	}
	return "", false
}
