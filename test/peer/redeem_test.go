package peer_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// b64Alphabet is the base64url alphabet in index order.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// nonCanonicalTail returns seg with its last character's unused low bits set, so it decodes to
// the same bytes under a lenient decoder but is not the canonical text.
func nonCanonicalTail(t *testing.T, seg string) string {
	t.Helper()
	last := strings.IndexByte(b64Alphabet, seg[len(seg)-1])
	if len(seg)%4 == 0 || last < 0 || last&1 != 0 {
		t.Fatalf("segment %q has no unused trailing bits to set", seg)
	}
	return seg[:len(seg)-1] + string(b64Alphabet[last|1])
}

// TestRedeemRunsTheChecksInContractOrder pins the check order and answer shapes of
// docs/peer-plane.md, "Redeem", on raw
// requests to the real listener: the method (405, allow: GET) and the bare route (404
// not_found) answer first, untraced and without plane headers; then the declaration
// (no_peer_plane), the token's shape (malformed_handle), the audience header (missing_audience:
// trimmed, lowercased, last one counts), the MAC (handle_not_valid), and the file-side
// refusals; every answer from the declaration check on carries x-murmur-generation and
// x-murmur-handle-id and is traced; a 200 carries exactly the validator headers and never
// x-murmur-export-root.
func TestRedeemRunsTheChecksInContractOrder(t *testing.T) {
	t.Parallel()
	a := startMinter(t, "--containment", "sealed")
	u := start(t, harness.Capsule{Manifest: manifestBare, Files: fixture.Layout{"out/x.md": "x"}})
	card := newFakePeer(t)
	card.setCard(cardJSON(`{"name":"Bravo","url":"http://localhost:9"}`))
	const audience = "bravo@localhost:9"
	valid := mint(t, a, card.Addr(), "report.md")
	if valid.Audience != audience {
		t.Fatalf("audience %q, want %q", valid.Audience, audience)
	}
	parts := strings.Split(valid.Handle, ".")
	pay, tag := parts[1], parts[2]

	t.Run("answered before the declaration check, not traced", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			p      *harness.Process
			method string
			target string
			status int
			code   string
		}{
			{"POST with a valid handle", a, "POST", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"PUT", a, "PUT", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"DELETE", a, "DELETE", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"PATCH", a, "PATCH", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"OPTIONS", a, "OPTIONS", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"lowercase get", a, "get", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"POST on the bare route", a, "POST", "/resources/peer", 405, "method_not_allowed"},
			{"POST on an undeclared plane", u, "POST", "/resources/peer/" + valid.Handle, 405, "method_not_allowed"},
			{"GET /resources/peer", a, "GET", "/resources/peer", 404, "not_found"},
			{"GET /resources/peer/", a, "GET", "/resources/peer/", 404, "not_found"},
			{"GET /resources/peer?x=1", a, "GET", "/resources/peer?x=1", 404, "not_found"},
			{"GET /resources/peer/?handle=x", a, "GET", "/resources/peer/?handle=" + valid.Handle, 404, "not_found"},
			{"GET /resources/peer/ on an undeclared plane", u, "GET", "/resources/peer/", 404, "not_found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := countEvents(t, tc.p, "peer_handle_redeem")
				r := harness.Request(t, tc.p.Ready.Listen, tc.method, tc.target, aud(audience))
				requireRefusal(t, r, tc.status, tc.code, "")
				if tc.status == 405 && r.Get("allow") != "GET" {
					t.Fatalf("405 without allow: GET: %v", r.Header)
				}
				if after := countEvents(t, tc.p, "peer_handle_redeem"); after != before {
					t.Fatalf("answered %s but traced %d redeem events; it must not be traced", tc.code, after-before)
				}
			})
		}
	})

	t.Run("HEAD is 405 too", func(t *testing.T) {
		for _, p := range []*harness.Process{a, u} {
			before := countEvents(t, p, "peer_handle_redeem")
			r := harness.Raw(t, p.Ready.Listen, "HEAD /resources/peer/"+valid.Handle+" HTTP/1.1\r\nHost: localhost\r\n"+aud(audience)+"\r\n\r\n")
			if r.Status != 405 || r.Get("allow") != "GET" || r.Get("x-murmur-generation") != "" || r.Get("x-murmur-handle-id") != "" {
				t.Fatalf("HEAD: %d %v, want 405 with allow: GET and no plane headers", r.Status, r.Header)
			}
			if countEvents(t, p, "peer_handle_redeem") != before {
				t.Fatalf("HEAD was traced")
			}
		}
	})

	t.Run("undeclared plane is no_peer_plane before the shape is looked at", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			token   string
			headers []string
		}{
			{"well-formed handle", valid.Handle, []string{aud(audience)}},
			{"malformed handle", "mh2.x.y", []string{aud(audience)}},
			{"no audience", forgeFor("report.md"), nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := redeem(t, u, tc.token, tc.headers...)
				msg := requireRefusal(t, r, 404, "no_peer_plane", handleID(tc.token))
				e := lastEventFor(t, u, "peer_handle_redeem", "handle_id", handleID(tc.token))
				requireShape(t, u, e, redeemKeys, "no_peer_plane")
				requireReason(t, e, msg)
				requireNull(t, e, "path", "bytes", "sha256")
			})
		}
	})

	t.Run("malformed_handle", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			token string
		}{
			{"mh2 prefix", "mh2." + pay + "." + tag},
			{"upper-case prefix", "MH1." + pay + "." + tag},
			{"no prefix", pay + "." + tag},
			{"two parts", "mh1." + pay},
			{"four parts", "mh1." + pay + "." + tag + "." + tag},
			{"empty payload segment", "mh1.." + tag},
			{"empty tag segment", "mh1." + pay + "."},
			{"= padding on the tag", "mh1." + pay + "." + tag + "="},
			{"= padding on the payload", "mh1." + pay + "==." + tag},
			{"+ in the payload", "mh1.+" + pay[1:] + "." + tag},
			{"/ in the tag", "mh1." + pay + "." + tag[:10] + "/" + tag[11:]},
			{"leading /", "/mh1." + pay + "." + tag},
			{"trailing /", "mh1." + pay + "." + tag + "/"},
			{"bad base64 length", "mh1." + pay + "." + tag + "AA"},
			{"bad base64, one spare character", "mh1.AAAAA." + tag},
			{"non-canonical trailing bits in the tag", "mh1." + pay + "." + nonCanonicalTail(t, tag)},
			{"non-canonical trailing bits in the payload", "mh1.QR." + tag},
			{"percent-encoded dot (no decoding)", "mh1%2E" + pay + "." + tag},
			{"percent-encoded character in a segment", "mh1." + pay + "%41." + tag},
			{"invalid percent-escape (kept literally)", "mh1." + pay + "%zz." + tag},
			{"lone percent", "mh1." + pay + "." + tag + "%"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := handleID(tc.token)
				r := redeem(t, a, tc.token, aud(audience))
				msg := requireRefusal(t, r, 400, "malformed_handle", id)
				e := lastEventFor(t, a, "peer_handle_redeem", "handle_id", id)
				requireShape(t, a, e, redeemKeys, "malformed_handle")
				requireReason(t, e, msg)
				requireField(t, e, "audience_asserted", audience)
				requireNull(t, e, "path", "bytes", "sha256")

				// The shape is checked before the audience.
				r = redeem(t, a, tc.token)
				requireRefusal(t, r, 400, "malformed_handle", id)
				requireNull(t, lastEventFor(t, a, "peer_handle_redeem", "handle_id", id), "audience_asserted")
			})
		}
	})

	t.Run("audience header", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			headers  []string
			status   int
			code     string
			asserted any // trace audience_asserted; nil means null
		}{
			{"absent", nil, 400, "missing_audience", nil},
			{"empty", []string{"x-murmur-audience:"}, 400, "missing_audience", ""},
			{"blank", []string{"x-murmur-audience:    \t "}, 400, "missing_audience", ""},
			{"wrong", []string{aud("charlie@localhost:9")}, 403, "handle_not_valid", "charlie@localhost:9"},
			{"upper-cased with spaces", []string{"X-Murmur-Audience:   BRAVO@LocalHost:9   "}, 200, "", audience},
			{"repeated, the last one right", []string{aud("charlie@localhost:9"), aud(audience)}, 200, "", audience},
			{"repeated, the last one wrong", []string{aud(audience), aud("charlie@localhost:9")}, 403, "handle_not_valid", "charlie@localhost:9"},
			{"repeated, the last one blank", []string{aud(audience), "x-murmur-audience: "}, 400, "missing_audience", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := mint(t, a, card.Addr(), "report.md")
				r := redeem(t, a, h.Handle, tc.headers...)
				var msg string
				if tc.status == 200 {
					if r.Status != 200 {
						t.Fatalf("status %d %s, want 200", r.Status, r.Body)
					}
				} else {
					msg = requireRefusal(t, r, tc.status, tc.code, h.HandleID)
				}
				e := eventFor(t, a, "peer_handle_redeem", "handle_id", h.HandleID)
				outcome := tc.code
				if tc.status == 200 {
					outcome = "ok"
				}
				requireShape(t, a, e, redeemKeys, outcome)
				if outcome != "ok" {
					requireReason(t, e, msg)
				}
				if tc.asserted == nil {
					requireNull(t, e, "audience_asserted")
				} else {
					requireField(t, e, "audience_asserted", tc.asserted)
				}
			})
		}
	})

	t.Run("audience is ASCII-lowercased only", func(t *testing.T) {
		umlaut := newFakePeer(t)
		umlaut.setCard(cardJSON(`{"name":"Ärger","url":"http://localhost:9"}`))
		h := mint(t, a, umlaut.Addr(), "report.md")
		if h.Audience != "ärger@localhost:9" {
			t.Fatalf("minted audience %q, want ärger@localhost:9", h.Audience)
		}
		if r := redeem(t, a, h.Handle, "x-murmur-audience: äRGER@LOCALHOST:9"); r.Status != 200 {
			t.Fatalf("ASCII letters in upper case: %d %q, want 200", r.Status, r.Body)
		}
		// Redeem step 5 (docs/peer-plane.md): trimmed and ASCII-lowercased. Ä is not ASCII, so
		// it stays upper-case and the audience is not the one the handle was minted for.
		r := redeem(t, a, h.Handle, "x-murmur-audience: ÄRGER@LOCALHOST:9")
		requireRefusal(t, r, http.StatusForbidden, "handle_not_valid", h.HandleID)
		requireField(t, lastEventFor(t, a, "peer_handle_redeem", "handle_id", h.HandleID), "audience_asserted", "Ärger@localhost:9")
	})

	t.Run("p is lowered, never decoded again", func(t *testing.T) {
		fixture.Write(t, filepath.Join(a.Ready.Workdir, "out", "handoff"), fixture.Layout{
			"a%41.txt": "the literal percent name\n",
			"aA.txt":   "the decoded name\n",
		})
		h := mint(t, a, card.Addr(), "a%2541.txt")
		var pl struct {
			P string `json:"p"`
		}
		_ = json.Unmarshal(payloadOf(t, h.Handle), &pl)
		if pl.P != "a%41.txt" {
			t.Fatalf("payload p %q, want a%%41.txt (decoded once at mint)", pl.P)
		}
		if r := redeem(t, a, h.Handle, aud(audience)); r.Status != 200 || string(r.Body) != "the literal percent name\n" {
			t.Fatalf("redeem: %d %q, want the file a%%41.txt", r.Status, r.Body)
		}
	})

	t.Run("200 carries exactly the validator headers", func(t *testing.T) {
		harness.Control(t, a.Ready.Control, http.MethodPost, "/v1/tasks/terminal", `{"state":"completed"}`)
		for _, target := range []string{valid.Handle, valid.Handle + "?x=1"} {
			r := redeem(t, a, target, aud(audience))
			want := minterFiles()["out/handoff/report.md"]
			if r.Status != 200 || string(r.Body) != want {
				t.Fatalf("GET %s: %d %q", target, r.Status, r.Body)
			}
			info, err := os.Stat(filepath.Join(a.Ready.Workdir, "out", "handoff", "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			harness.RequireHeaders(t, r, map[string]string{
				"content-type":         "application/octet-stream",
				"etag":                 harness.ETag([]byte(want)),
				"x-murmur-mtime-ms":    strconv.FormatInt(info.ModTime().UnixMilli(), 10),
				"x-murmur-generation":  "1",
				"x-murmur-containment": "sealed",
				"x-murmur-handle-id":   valid.HandleID,
				"content-length":       strconv.Itoa(len(want)),
				"connection":           "close",
			})
			if r.Has("x-murmur-export-root") {
				t.Errorf("a redeem discloses x-murmur-export-root: %q", r.Get("x-murmur-export-root"))
			}
		}
		e := lastEventFor(t, a, "peer_handle_redeem", "handle_id", valid.HandleID)
		requireShape(t, a, e, redeemKeys, "ok")
		requireField(t, e, "path", "report.md")
		requireField(t, e, "generation", 1)
		requireField(t, e, "audience_asserted", audience)
	})

	t.Run("file-side refusals after the MAC", func(t *testing.T) {
		root := filepath.Join(a.Ready.Workdir, "out", "handoff")
		fixture.Write(t, root, fixture.Layout{
			"gone.md":    "soon gone\n",
			"big.bin":    strings.Repeat("x", 1025),
			"exact.bin":  strings.Repeat("y", 1024),
			"to-dir.md":  "becomes a directory\n",
			"to-link.md": "becomes a symlink out of the root\n",
			"to-fifo.md": "becomes a FIFO\n",
		})
		handles := map[string]minted{}
		for _, name := range []string{"gone.md", "big.bin", "exact.bin", "to-dir.md", "to-link.md", "to-fifo.md"} {
			handles[name] = mint(t, a, card.Addr(), name) // the mint never looks at max_bytes
		}
		must(t, os.Remove(filepath.Join(root, "gone.md")))
		fixture.Write(t, root, fixture.Layout{"to-dir.md/": "", "to-link.md -> ../secret.md": "", "to-fifo.md|": ""})

		for _, tc := range []struct {
			file   string
			status int
			code   string
		}{
			{"gone.md", 404, "not_found"},
			{"big.bin", 413, "too_large"},
			{"to-dir.md", 403, "not_a_regular_file"},
			{"to-link.md", 403, "outside_root"},
			{"to-fifo.md", 403, "not_a_regular_file"},
			{"exact.bin", 200, ""},
		} {
			t.Run(tc.code+" "+tc.file, func(t *testing.T) {
				h := handles[tc.file]
				r := redeem(t, a, h.Handle, aud(audience))
				if tc.status == 200 {
					if r.Status != 200 || len(r.Body) != 1024 {
						t.Fatalf("a file of exactly max_bytes: %d, %d bytes", r.Status, len(r.Body))
					}
					return
				}
				msg := requireRefusal(t, r, tc.status, tc.code, h.HandleID)
				requireNoHostPath(t, msg, a)
				if strings.Contains(msg, tc.file) {
					t.Fatalf("message %q names the file", msg)
				}
				e := eventFor(t, a, "peer_handle_redeem", "handle_id", h.HandleID)
				requireShape(t, a, e, redeemKeys, tc.code)
				requireReason(t, e, msg)
				requireNull(t, e, "path", "bytes", "sha256")
				requireField(t, e, "audience_asserted", audience)
			})
		}
	})

	// Last: it re-points the export root.
	t.Run("root re-pointed outside the workdir is outside_root", func(t *testing.T) {
		root := filepath.Join(a.Ready.Workdir, "out", "handoff")
		outside := t.TempDir()
		fixture.Write(t, outside, fixture.Layout{"report.md": "outside the workdir\n"})
		must(t, os.Rename(root, root+".real"))
		fixture.Write(t, a.Ready.Workdir, fixture.Layout{"out/handoff -> " + outside: ""})
		defer func() {
			must(t, os.Remove(root))
			must(t, os.Rename(root+".real", root))
		}()
		r := redeem(t, a, valid.Handle, aud(audience))
		requireRefusal(t, r, http.StatusForbidden, "outside_root", valid.HandleID)
		if strings.Contains(string(r.Body), "outside the workdir") {
			t.Fatalf("served a byte from outside the workdir")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
