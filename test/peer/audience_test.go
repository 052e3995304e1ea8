package peer_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

const manifestThird = `name: Charlie
capabilities:
  peer_fetch:
    allow: ["127.0.0.1"]
`

// retag returns token with its payload replaced by payload and its tag kept.
func retag(token, payload string) string {
	parts := strings.Split(token, ".")
	return "mh1." + b64.EncodeToString([]byte(payload)) + "." + parts[2]
}

// withTag returns token with its tag replaced by tag.
func withTag(token string, tag []byte) string {
	parts := strings.Split(token, ".")
	return "mh1." + parts[1] + "." + b64.EncodeToString(tag)
}

// tagOf decodes token's tag.
func tagOf(t *testing.T, token string) []byte {
	t.Helper()
	tag, err := b64.DecodeString(strings.Split(token, ".")[2])
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// editPayload decodes token's payload, applies edit to it as a map and re-encodes it.
func editPayload(t *testing.T, token string, edit func(map[string]any)) string {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(payloadOf(t, token)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestRedeemBindsTheHandleToOneAudienceAndOneInstance pins docs/peer-plane.md ("What the
// binding proves", "Redeem" steps 6–9, "The minting key"): a third capsule, a wrong audience, a
// tampered payload or MAC
// and a handle of an earlier process of the same capsule over the same workdir all get one
// byte-identical 403 handle_not_valid (nothing after the MAC is evaluated first, so a tampered
// payload that escapes the root, is expired or is not JSON answers the same); an expired handle
// is 410 handle_expired; redeem is idempotent and always serves the file's current bytes.
func TestRedeemBindsTheHandleToOneAudienceAndOneInstance(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	// B advertises no proof key, so its handles are unbound and a raw client asserting its
	// audience stands in for it (bound handles: proof_test.go).
	b := startFetcher(t, "--peer-proof", "off")
	c := start(t, harness.Capsule{Manifest: manifestThird})
	if c.Ready.Audience == b.Ready.Audience {
		t.Fatalf("the third capsule must have its own audience")
	}
	m := mint(t, a, b.Ready.Listen, "report.md")
	if r := redeem(t, a, m.Handle, aud(b.Ready.Audience)); r.Status != 200 {
		t.Fatalf("the intended audience cannot redeem: %d %s", r.Status, r.Body)
	}
	other := mint(t, a, b.Ready.Listen, "report.md")
	forC := mint(t, a, c.Ready.Listen, "report.md")
	if forC.Audience != c.Ready.Audience {
		t.Fatalf("minted for C with audience %q, want %q", forC.Audience, c.Ready.Audience)
	}

	// reference is the one handle_not_valid body every case must reproduce byte for byte.
	reference := redeem(t, a, m.Handle, aud(c.Ready.Audience))
	requireRefusal(t, reference, http.StatusForbidden, "handle_not_valid", m.HandleID)
	tag := tagOf(t, m.Handle)
	flipped := bytes.Clone(tag)
	flipped[0] ^= 0x01

	notValid := []struct {
		name     string
		token    string
		audience string
	}{
		{"third capsule's audience", m.Handle, c.Ready.Audience},
		{"minter's own audience", m.Handle, a.Ready.Audience},
		{"audience on another port", m.Handle, "bravo@localhost:1"},
		{"audience of a handle minted for someone else", forC.Handle, b.Ready.Audience},
		{"tampered payload: another file", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["p"] = "sub/deep.txt" })), b.Ready.Audience},
		{"tampered payload: a path escaping the root", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["p"] = "../secret.md" })), b.Ready.Audience},
		{"tampered payload: later expiry", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["exp"] = json.Number("99999999999999") })), b.Ready.Audience},
		{"tampered payload: already expired", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["exp"] = json.Number("1") })), b.Ready.Audience},
		{"tampered payload: another issuer", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["iss"] = "ses_01a033ec2c1f7eb2a5922f84e012e89d" })), b.Ready.Audience},
		{"tampered payload: v 2", retag(m.Handle, editPayload(t, m.Handle, func(p map[string]any) { p["v"] = 2 })), b.Ready.Audience},
		{"tampered payload: not JSON", retag(m.Handle, "not json"), b.Ready.Audience},
		{"tampered MAC: one bit", withTag(m.Handle, flipped), b.Ready.Audience},
		{"tampered MAC: 31 bytes", withTag(m.Handle, tag[:31]), b.Ready.Audience},
		{"tampered MAC: 33 bytes", withTag(m.Handle, append(bytes.Clone(tag), 0)), b.Ready.Audience},
		{"MAC of another handle", withTag(m.Handle, tagOf(t, other.Handle)), b.Ready.Audience},
		{"forged MAC", forgeFor("report.md"), b.Ready.Audience},
	}
	t.Run("handle_not_valid is one answer", func(t *testing.T) {
		for _, tc := range notValid {
			t.Run(tc.name, func(t *testing.T) {
				r := redeem(t, a, tc.token, aud(tc.audience))
				msg := requireRefusal(t, r, http.StatusForbidden, "handle_not_valid", handleID(tc.token))
				if !bytes.Equal(r.Body, reference.Body) {
					t.Fatalf("body %q differs from the reference handle_not_valid body %q", r.Body, reference.Body)
				}
				e := lastEventFor(t, a, "peer_handle_redeem", "handle_id", handleID(tc.token))
				requireShape(t, a, e, redeemKeys, "handle_not_valid")
				requireReason(t, e, msg)
				requireNull(t, e, "path", "bytes", "sha256")
				requireField(t, e, "audience_asserted", tc.audience)
			})
		}
	})

	t.Run("third capsule's fetch-peer-file is refused", func(t *testing.T) {
		got := fetch(t, c, a.Ready.Listen, m.Handle)
		harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "handle_not_valid")
		e := lastEventFor(t, c, "peer_file_fetch", "handle_id", m.HandleID)
		requireShape(t, c, e, fetchKeys, "handle_not_valid")
		requireReason(t, e, got.Message())
		requireNull(t, e, "stored_path", "bytes", "sha256")
		requireField(t, e, "peer", a.Ready.Listen)
		requireNothingStored(t, c, m.HandleID)
		redeemed := lastEventFor(t, a, "peer_handle_redeem", "handle_id", m.HandleID)
		requireField(t, redeemed, "audience_asserted", c.Ready.Audience)
		requireField(t, redeemed, "outcome", "handle_not_valid")
	})

	t.Run("expired handle", func(t *testing.T) {
		before := time.Now().UnixMilli()
		zero := mint(t, a, b.Ready.Listen, "report.md", "0")
		if zero.ExpiresAtMs < before || zero.ExpiresAtMs > time.Now().UnixMilli() {
			t.Fatalf("ttl 0: expires_at_ms %d, want now", zero.ExpiresAtMs)
		}
		r := redeem(t, a, zero.Handle, aud(b.Ready.Audience))
		requireRefusal(t, r, http.StatusGone, "handle_expired", zero.HandleID)
		e := lastEventFor(t, a, "peer_handle_redeem", "handle_id", zero.HandleID)
		requireShape(t, a, e, redeemKeys, "handle_expired")
		requireNull(t, e, "path", "bytes", "sha256")
		// The MAC comes first: an expired handle under the wrong audience is not valid.
		r = redeem(t, a, zero.Handle, aud(c.Ready.Audience))
		requireRefusal(t, r, http.StatusForbidden, "handle_not_valid", zero.HandleID)
		if !bytes.Equal(r.Body, reference.Body) {
			t.Fatalf("body %q differs from the reference %q", r.Body, reference.Body)
		}
		got := fetch(t, b, a.Ready.Listen, zero.Handle)
		harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "handle_expired")
		requireNothingStored(t, b, zero.HandleID)

		short := mint(t, a, b.Ready.Listen, "report.md", "1s")
		if r := redeem(t, a, short.Handle, aud(b.Ready.Audience)); r.Status != 200 {
			t.Fatalf("a 1s handle does not redeem at once: %d %s", r.Status, r.Body)
		}
		time.Sleep(time.Until(time.UnixMilli(short.ExpiresAtMs + 50)))
		requireRefusal(t, redeem(t, a, short.Handle, aud(b.Ready.Audience)), http.StatusGone, "handle_expired", short.HandleID)
	})

	t.Run("idempotent and always the current bytes", func(t *testing.T) {
		fixture.Write(t, a.Ready.Workdir, fixture.Layout{"out/handoff/rewrite.md": "version one\n"})
		path := filepath.Join(a.Ready.Workdir, "out", "handoff", "rewrite.md")
		h := mint(t, a, b.Ready.Listen, "rewrite.md")
		first := redeem(t, a, h.Handle, aud(b.Ready.Audience))
		again := redeem(t, a, h.Handle, aud(b.Ready.Audience))
		if first.Status != 200 || again.Status != 200 || string(first.Body) != "version one\n" ||
			!bytes.Equal(first.Body, again.Body) || first.Get("etag") != again.Get("etag") {
			t.Fatalf("redeeming twice: %d %q %s / %d %q %s", first.Status, first.Body, first.Get("etag"), again.Status, again.Body, again.Get("etag"))
		}
		if n := len(eventsFor(t, a, "peer_handle_redeem", "handle_id", h.HandleID)); n != 2 {
			t.Fatalf("%d redeem events, want 2", n)
		}
		// A completed task moves the generation, not the etag.
		gen := first.Get("x-murmur-generation")
		harness.Control(t, a.Ready.Control, http.MethodPost, "/v1/tasks/terminal", `{"state":"failed"}`)
		later := redeem(t, a, h.Handle, aud(b.Ready.Audience))
		if later.Get("etag") != first.Get("etag") || later.Get("x-murmur-generation") == gen {
			t.Fatalf("after a task: etag %s (was %s), generation %s (was %s)", later.Get("etag"), first.Get("etag"), later.Get("x-murmur-generation"), gen)
		}
		// Rewrite by rename; the same handle serves the new bytes with a new etag.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte("version two, longer\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		second := redeem(t, a, h.Handle, aud(b.Ready.Audience))
		if second.Status != 200 || string(second.Body) != "version two, longer\n" {
			t.Fatalf("after the rewrite: %d %q", second.Status, second.Body)
		}
		if second.Get("etag") == first.Get("etag") || second.Get("etag") != harness.ETag(second.Body) {
			t.Fatalf("etag %s after the rewrite (was %s)", second.Get("etag"), first.Get("etag"))
		}
		// fetch-peer-file twice: the later fetch replaces the stored file.
		s1 := fetch(t, b, a.Ready.Listen, h.Handle)
		if err := os.WriteFile(tmp, []byte("version three\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		s2 := fetch(t, b, a.Ready.Listen, h.Handle)
		var r1, r2 stored
		_ = json.Unmarshal(s1.Data(t), &r1)
		_ = json.Unmarshal(s2.Data(t), &r2)
		if r1.Path != r2.Path || r2.SHA256 != harness.SHA256Hex([]byte("version three\n")) {
			t.Fatalf("fetching twice: %+v then %+v", r1, r2)
		}
		if onDisk, _ := os.ReadFile(filepath.Join(b.Ready.Workdir, r2.Path)); string(onDisk) != "version three\n" {
			t.Fatalf("stored %q after the second fetch", onDisk)
		}
		requireNoTemp(t, b)
	})

	// Last: it stops the minter.
	t.Run("handle of an earlier process of the same capsule", func(t *testing.T) {
		if code := a.Stop(t); code != 0 {
			t.Fatalf("minter exited %d on SIGTERM", code)
		}
		again := start(t, harness.Capsule{Manifest: manifestMinter, Args: []string{"--workdir", a.Ready.Workdir}})
		if again.Ready.Workdir != a.Ready.Workdir || again.Ready.SessionID == a.Ready.SessionID {
			t.Fatalf("restart: workdir %s session %s", again.Ready.Workdir, again.Ready.SessionID)
		}
		r := redeem(t, again, m.Handle, aud(b.Ready.Audience))
		requireRefusal(t, r, http.StatusForbidden, "handle_not_valid", m.HandleID)
		if !bytes.Equal(r.Body, reference.Body) {
			t.Fatalf("body %q differs from the reference %q", r.Body, reference.Body)
		}
		if r.Get("x-murmur-generation") != "0" {
			t.Fatalf("a fresh process reports generation %q, want 0", r.Get("x-murmur-generation"))
		}
		harness.RequireControlRefusal(t, fetch(t, b, again.Ready.Listen, m.Handle), http.StatusUnprocessableEntity, "handle_not_valid")
		fresh := mint(t, again, b.Ready.Listen, "report.md")
		if r := redeem(t, again, fresh.Handle, aud(b.Ready.Audience)); r.Status != 200 {
			t.Fatalf("a handle of the new process does not redeem: %d %s", r.Status, r.Body)
		}
	})
}
