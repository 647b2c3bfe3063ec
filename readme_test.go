package subactor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestReadmeShortPathIsExampleNew keeps the README's short-path example the
// code that ExampleNew compiles and checks.
func TestReadmeShortPathIsExampleNew(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, ok := goBlockWith(string(readme), "func ExampleNew()")
	if !ok {
		t.Fatal("README has no Go code block with ExampleNew")
	}
	src, err := os.ReadFile("subactor_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ExampleNew" {
			// With its doc comment; positions are 1-based offsets here.
			example = string(src[fn.Doc.Pos()-1 : fn.End()-1])
		}
	}
	if strings.TrimSpace(block) != strings.TrimSpace(example) {
		t.Fatalf("README's short path differs from ExampleNew; copy it with its doc comment into the README")
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
