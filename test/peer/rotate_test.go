package peer_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/resplane/resplane/test/harness"
)

// TestRotateKeyRevokesEveryHandleMintedBefore pins docs/peer-plane.md, "Revoking every
// handle", through the control API and the CLI: handles minted before a rotation, bound and
// unbound, are handle_not_valid from then on; handles minted after redeem; each rotation is
// traced as peer_key_rotate (outcome only); it is no tool, so MCP and GET /v1/tools never offer
// it; without exports.peer_files it is 404 no_peer_plane, and the CLI exits 1.
func TestRotateKeyRevokesEveryHandleMintedBefore(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	b := startFetcher(t)
	bound := mint(t, a, b.Ready.Listen, "report.md")
	keyless := newFakePeer(t)
	keyless.setCard(cardJSON(`{"name":"Fake","url":"http://fake.example:1"}`))
	unbound := mint(t, a, keyless.Addr(), "report.md")

	got := harness.Control(t, a.Ready.Control, http.MethodPost, "/v1/peer/rotate-key", nil)
	if got.Status != 200 {
		t.Fatalf("rotate-key: %d %s", got.Status, got.Raw)
	}
	harness.RequireKeys(t, "rotate-key answer", got.Raw, "rotated_at_ms")
	var answer struct {
		RotatedAtMs int64 `json:"rotated_at_ms"`
	}
	if err := json.Unmarshal(got.Raw, &answer); err != nil || answer.RotatedAtMs < bound.ExpiresAtMs-3600_000 {
		t.Fatalf("rotated_at_ms %d (%v), want an instant after the mints", answer.RotatedAtMs, err)
	}
	rotations := eventsFor(t, a, "peer_key_rotate", "", "")
	if len(rotations) != 1 {
		t.Fatalf("%d peer_key_rotate events, want 1", len(rotations))
	}
	requireShape(t, a, rotations[0], []string{"outcome"}, "ok")

	requireRefusal(t, redeem(t, a, unbound.Handle, aud(holderAudience)), 403, "handle_not_valid", unbound.HandleID)
	if r := fetch(t, b, a.Ready.Listen, bound.Handle); r.Code() != "handle_not_valid" {
		t.Fatalf("a bound handle minted before the rotation: %d %s", r.Status, r.Raw)
	}
	after := mint(t, a, b.Ready.Listen, "report.md")
	if r := fetch(t, b, a.Ready.Listen, after.Handle); r.Status != 200 {
		t.Fatalf("a handle minted after the rotation: %d %s", r.Status, r.Raw)
	}

	code, out, errOut := cli(t, "peer", "rotate-key", "--control", a.Ready.Control)
	if code != 0 || !strings.HasPrefix(out, `{"rotated_at_ms":`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("resplane peer rotate-key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if r := fetch(t, b, a.Ready.Listen, after.Handle); r.Code() != "handle_not_valid" {
		t.Fatalf("after the second rotation: %d %s", r.Status, r.Raw)
	}
	if n := len(eventsFor(t, a, "peer_key_rotate", "", "")); n != 2 {
		t.Fatalf("%d peer_key_rotate events, want 2", n)
	}

	tools := harness.Control(t, a.Ready.Control, http.MethodGet, "/v1/tools", nil)
	if strings.Contains(string(tools.Raw), "rotate") {
		t.Fatalf("rotate-key is offered as a tool: %s", tools.Raw)
	}
	none := harness.Control(t, b.Ready.Control, http.MethodPost, "/v1/peer/rotate-key", nil)
	harness.RequireControlRefusal(t, none, http.StatusNotFound, "no_peer_plane")
	code, out, errOut = cli(t, "peer", "rotate-key", "--control", b.Ready.Control)
	if code != 1 || out != "" || !strings.Contains(errOut, `"error":"no_peer_plane"`) {
		t.Fatalf("rotate-key without a peer plane: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := countEvents(t, b, "peer_key_rotate"); n != 0 {
		t.Fatalf("a refused rotation was traced (%d events)", n)
	}
}
