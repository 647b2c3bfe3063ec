package subactor_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// contractsPointer is the line a package doc carries when the package's
// comments cite contract codes.
const contractsPointer = "Codes such as (R4) name contracts: https://github.com/subactor/subactor/blob/main/docs/contracts.md"

var (
	// citation is a parenthesised group of codes in a comment: (K3),
	// (R1, R3), (D1-D4), (O1–O4).
	citation = regexp.MustCompile(`\(([A-Z][0-9]+(?:(?:, ?| and |[-–])[A-Z][0-9]+)*)\)`)
	code     = regexp.MustCompile(`[A-Z][0-9]+`)
	// defined is a code docs/contracts.md defines: **K3, or **O1–O4.
	defined = regexp.MustCompile(`\*\*([A-Z])([0-9]+)(?:–[A-Z]([0-9]+))?`)
)

// Godoc cites contracts only by codes that docs/contracts.md defines, and
// every public package that cites one points to that page from its
// package doc (an internal package's doc is not published).
func TestContractCodesLinkToTheirPage(t *testing.T) {
	page, err := os.ReadFile("docs/contracts.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range defined.FindAllStringSubmatch(string(page), -1) {
		lo, _ := strconv.Atoi(m[2])
		hi := lo
		if m[3] != "" {
			hi, _ = strconv.Atoi(m[3])
		}
		for i := lo; i <= hi; i++ {
			known[m[1]+strconv.Itoa(i)] = true
		}
	}
	cites := map[string]bool{}    // package dirs whose comments cite codes
	pointers := map[string]bool{} // package dirs whose doc has the pointer
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bench" || path == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if f.Doc != nil && strings.Contains(f.Doc.Text(), contractsPointer) {
			pointers[dir] = true
		}
		for _, g := range f.Comments {
			for _, c := range citation.FindAllStringSubmatch(g.Text(), -1) {
				cites[dir] = true
				for _, id := range code.FindAllString(c[1], -1) {
					if !known[id] {
						t.Errorf("%s cites (%s), which docs/contracts.md does not define", path, id)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cites) == 0 {
		t.Fatal("no package cites a contract code: is the pattern right?")
	}
	for dir := range cites {
		internal := strings.HasPrefix(dir, "internal/") || strings.Contains(dir, "/internal/")
		if !internal && !pointers[dir] {
			t.Errorf("package %s cites contract codes but its package doc does not carry %q", dir, contractsPointer)
		}
	}
}
