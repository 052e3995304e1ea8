package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

// notOnTheListener are the refusal codes that only the agent tools, the control API and
// resplane's own clients produce: they never reach the resource listener, so statusOf has no
// row for them.
var notOnTheListener = map[refusal.Code]bool{
	refusal.InvalidInput:       true,
	refusal.PeerUnreachable:    true,
	refusal.PeerNotAllowed:     true,
	refusal.EtagMismatch:       true,
	refusal.UnknownTool:        true,
	refusal.ServiceUnreachable: true,
	refusal.InvalidListing:     true,
	refusal.UnsafePath:         true,
	refusal.Interrupted:        true,
}

// declaredCodes reads every constant of type Code that any file of domain/refusal declares,
// so that a code added there without a status here fails this test.
func declaredCodes(t *testing.T) map[refusal.Code]bool {
	t.Helper()
	files, err := filepath.Glob("../../domain/refusal/*.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[refusal.Code]bool{}
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			addDeclaredCodes(t, name, codes)
		}
	}
	if len(codes) == 0 {
		t.Fatal("no refusal codes found in domain/refusal")
	}
	return codes
}

// addDeclaredCodes adds the Code constants the Go file name declares to codes.
func addDeclaredCodes(t *testing.T, name string, codes map[refusal.Code]bool) {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, s := range gen.Specs {
			spec := s.(*ast.ValueSpec)
			if typ, ok := spec.Type.(*ast.Ident); !ok || typ.Name != "Code" {
				continue
			}
			for _, v := range spec.Values {
				value, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[refusal.Code(value)] = true
			}
		}
	}
}

func TestEveryRefusalCodeHasExactlyOneListenerStatus(t *testing.T) {
	declared := declaredCodes(t)
	for code := range declared {
		status, mapped := statusOf[code]
		switch {
		case notOnTheListener[code] && mapped:
			t.Errorf("%s is a tool-only code but statusOf maps it to %d", code, status)
		case !notOnTheListener[code] && !mapped:
			t.Errorf("%s can reach the resource listener but statusOf has no status for it", code)
		case mapped && (status < 400 || status > 599):
			t.Errorf("%s maps to %d, which is not an error status", code, status)
		}
	}
	for code := range statusOf {
		if !declared[code] {
			t.Errorf("statusOf maps %s, which domain/refusal does not declare", code)
		}
	}
}

func TestOnlyIOErrorAndUnmappedCodesAnswer500(t *testing.T) {
	for code, status := range statusOf {
		if (status == http.StatusInternalServerError) != (code == refusal.IOError) {
			t.Errorf("%s answers %d; only io_error answers 500", code, status)
		}
	}
	if got := statusFor("no_such_code"); got != http.StatusInternalServerError {
		t.Errorf("an unmapped code answers %d; want 500", got)
	}
}

func TestRefusalBodiesAreNotHTMLEscaped(t *testing.T) {
	got := string(encodeJSON(errorBody{Error: "x", Message: "a <b> & c"}))
	if want := `{"error":"x","message":"a <b> & c"}`; got != want {
		t.Fatalf("encoded %s; want %s", got, want)
	}
}
