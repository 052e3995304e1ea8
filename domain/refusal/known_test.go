package refusal

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestKnownIsExactlyTheDeclaredCodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  Code
		known bool
	}{
		{"a code of the resource plane is known", NotFound, true},
		{"a code of the tools is known", PeerUnreachable, true},
		{"a peer's own code is not", "quota_exceeded", false},
		{"an http status outcome is not", "http_502", false},
		{"the empty code is not", "", false},
		{"ok is an outcome, not a code", "ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Known(tc.code); got != tc.known {
				t.Fatalf("Known(%q) = %v, want %v", tc.code, got, tc.known)
			}
		})
	}
}

// TestEveryCodeConstantIsDeclared reads this package's source: a Code constant added anywhere
// in it must be added to declared too, or Known would call it foreign.
func TestEveryCodeConstantIsDeclared(t *testing.T) {
	files := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var constants []Code
	for _, entry := range entries {
		if !strings.HasSuffix(entry.Name(), ".go") || strings.HasSuffix(entry.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(files, entry.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				value := spec.(*ast.ValueSpec)
				if ident, ok := value.Type.(*ast.Ident); !ok || ident.Name != "Code" {
					continue
				}
				for _, lit := range value.Values {
					constants = append(constants, Code(strings.Trim(lit.(*ast.BasicLit).Value, `"`)))
				}
			}
		}
	}
	if len(constants) == 0 {
		t.Fatal("found no Code constants: the test no longer reads the declarations")
	}
	for _, c := range constants {
		if !Known(c) {
			t.Errorf("the constant %q is missing from declared", c)
		}
	}
	if len(declared) != len(constants) || slices.ContainsFunc(declared, func(c Code) bool { return !slices.Contains(constants, c) }) {
		t.Errorf("declared %q, but the constants are %q", declared, constants)
	}
}
