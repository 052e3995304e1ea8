package httpapi

import (
	"net/http"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

func TestEveryPlaneRefusalHasTheContractStatus(t *testing.T) {
	cases := map[refusal.Code]int{
		refusal.NoResourcePlane:  http.StatusNotFound,
		refusal.NoPeerPlane:      http.StatusNotFound,
		refusal.NotFound:         http.StatusNotFound,
		refusal.OutsideRoot:      http.StatusForbidden,
		refusal.SymlinkRefused:   http.StatusForbidden,
		refusal.NotARegularFile:  http.StatusForbidden,
		refusal.TooLarge:         http.StatusRequestEntityTooLarge,
		refusal.MethodNotAllowed: http.StatusMethodNotAllowed,
		refusal.IOError:          http.StatusInternalServerError,
		refusal.MalformedHandle:  http.StatusBadRequest,
		refusal.MissingAudience:  http.StatusBadRequest,
		refusal.HandleNotValid:   http.StatusForbidden,
		refusal.HandleExpired:    http.StatusGone,
	}
	for code, want := range cases {
		if got := statusFor(code); got != want {
			t.Errorf("%s answers %d; want %d", code, got, want)
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
