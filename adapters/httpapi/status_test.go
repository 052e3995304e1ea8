package httpapi

import (
	"net/http"
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
	refusal.PeerKeyMissing:     true,
	refusal.ServiceUnreachable: true,
	refusal.InvalidListing:     true,
	refusal.UnsafePath:         true,
	refusal.Interrupted:        true,
}

// declaredCodes is every code domain/refusal declares (refusal.Codes, which that package's
// tests keep equal to its Code constants), so that a code added there without a status here
// fails this test.
func declaredCodes() map[refusal.Code]bool {
	codes := map[refusal.Code]bool{}
	for _, c := range refusal.Codes() {
		codes[c] = true
	}
	return codes
}

func TestEveryRefusalCodeHasExactlyOneListenerStatus(t *testing.T) {
	declared := declaredCodes()
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
