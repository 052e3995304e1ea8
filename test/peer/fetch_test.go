package peer_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// status answers with code, the given content type and body.
func status(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("content-type", contentType)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// withETags answers 200 with body and exactly the given etag header values.
func withETags(body string, etags ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Etag"] = etags
		_, _ = w.Write([]byte(body))
	}
}

// hijacked writes raw bytes on the connection and closes it.
func hijacked(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString(raw)
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// TestFetchPeerFileRefusesAndStoresSafely pins docs/peer-plane.md, "fetch-peer-file", with fake
// peers in the test
// process: the allow-list is checked before any connection; a handle with a character outside
// [A-Za-z0-9._-] is invalid_input and untraced; an etag that does not describe the body, a
// redirect, a non-200 (its JSON error code, else http_<status>), a body over the receive limit
// and a body shorter than its content-length all store nothing and leave no temp file; a
// missing etag is accepted; and the stored name is peer-in/<handle_id>-<sanitised basename>.
func TestFetchPeerFileRefusesAndStoresSafely(t *testing.T) {
	t.Parallel()
	b := startFetcher(t, "--fetch-max-bytes", "1Ki")
	f := newFakePeer(t)

	t.Run("peer_not_allowed before any connection", func(t *testing.T) {
		for _, peer := range []string{
			"localhost:" + f.Port(),
			"http://localhost:" + f.Port(),
			"ftp://127.0.0.1:" + f.Port(),
			"127.0.0.1:99999",
		} {
			t.Run(peer, func(t *testing.T) {
				token := forgeFor("report.md")
				f.handle(token, serveBytes([]byte("must not be fetched")))
				conns := f.conns.Load()
				got := fetch(t, b, peer, token)
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "peer_not_allowed")
				if f.conns.Load() != conns {
					t.Fatalf("the peer saw a connection")
				}
				e := eventFor(t, b, "peer_file_fetch", "handle_id", handleID(token))
				requireShape(t, b, e, fetchKeys, "peer_not_allowed")
				requireReason(t, e, got.Message())
				requireField(t, e, "peer", peer)
				requireNull(t, e, "stored_path", "bytes", "sha256")
				requireNothingStored(t, b, handleID(token))
			})
		}
	})

	t.Run("invalid_input is not traced", func(t *testing.T) {
		valid := forgeFor("report.md")
		for _, tc := range []struct {
			name string
			body any
		}{
			{"+ in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.ab+c.def"}},
			{"space in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.a b.c"}},
			{"/ in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.a/b.c"}},
			{"% in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.a%2e.c"}},
			{"? in the handle", map[string]any{"peer": f.Addr(), "handle": valid + "?x=1"}},
			{"newline in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.a\r\nx-evil: 1.c"}},
			{"non-ASCII in the handle", map[string]any{"peer": f.Addr(), "handle": "mh1.é.c"}},
			{"blank handle", map[string]any{"peer": f.Addr(), "handle": "  "}},
			{"missing handle", map[string]any{"peer": f.Addr()}},
			{"blank peer", map[string]any{"peer": "", "handle": valid}},
			{"non-string handle", map[string]any{"peer": f.Addr(), "handle": 1}},
			{"body not an object", `["x"]`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before, conns := countEvents(t, b, "peer_file_fetch"), f.conns.Load()
				got := harness.Control(t, b.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", tc.body)
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "invalid_input")
				if n := countEvents(t, b, "peer_file_fetch"); n != before {
					t.Fatalf("invalid input was traced")
				}
				if f.conns.Load() != conns {
					t.Fatalf("invalid input reached the peer")
				}
			})
		}
	})

	body := "peer bytes\n"
	goodETag := harness.ETag([]byte(body))
	big := strings.Repeat("z", 2048)
	t.Run("refused, nothing stored, no temp file", func(t *testing.T) {
		redirectTarget := forgeFor("redirected.md")
		f.handle(redirectTarget, serveBytes([]byte(body)))
		for _, tc := range []struct {
			name    string
			handler http.HandlerFunc
			code    string
		}{
			{"wrong etag", withETags(body, `"sha256:`+strings.Repeat("0", 64)+`"`), "etag_mismatch"},
			{"etag in upper-case hex", withETags(body, strings.ToUpper(goodETag)), "etag_mismatch"},
			{"etag without quotes", withETags(body, strings.Trim(goodETag, `"`)), "etag_mismatch"},
			{"weak etag", withETags(body, "W/"+goodETag), "etag_mismatch"},
			{"the first of two etags is wrong", withETags(body, `"sha256:`+strings.Repeat("0", 64)+`"`, goodETag), "etag_mismatch"},
			{"302 is not followed", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/resources/peer/"+redirectTarget, http.StatusFound)
			}, "http_302"},
			{"3xx with a JSON error is still http_status", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("location", "/resources/peer/"+redirectTarget)
				status(http.StatusMovedPermanently, "application/json", `{"error":"handle_expired"}`)(w, nil)
			}, "http_301"},
			{"410 with a JSON error", status(http.StatusGone, "application/json", `{"error":"handle_expired","message":"The handle has expired."}`), "handle_expired"},
			{"403 with a JSON error", status(http.StatusForbidden, "application/json", `{"error":"handle_not_valid","message":"x"}`), "handle_not_valid"},
			{"500 with a non-JSON body", status(http.StatusInternalServerError, "text/plain", "internal oops"), "http_500"},
			{"404 with an empty body", status(http.StatusNotFound, "", ""), "http_404"},
			{"403 with a non-string error", status(http.StatusForbidden, "application/json", `{"error":5}`), "http_403"},
			{"403 with an empty error", status(http.StatusForbidden, "application/json", `{"error":""}`), "http_403"},
			{"418 without an error field", status(http.StatusTeapot, "application/json", `{"message":"no code"}`), "http_418"},
			{"over the receive limit by content-length", serveBytes([]byte(big)), "too_large"},
			{"over the receive limit while streaming", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("etag", harness.ETag([]byte(big)))
				_, _ = w.Write([]byte(big[:1000]))
				w.(http.Flusher).Flush()
				_, _ = w.Write([]byte(big[1000:]))
			}, "too_large"},
			{"body shorter than content-length", hijacked("HTTP/1.1 200 OK\r\ncontent-length: 100\r\netag: " + goodETag + "\r\n\r\n" + body), "peer_unreachable"},
			{"connection closed without an answer", hijacked(""), "peer_unreachable"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				token := forgeFor("report.md")
				id := handleID(token)
				f.handle(token, tc.handler)
				got := fetch(t, b, f.Addr(), token)
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, tc.code)
				if strings.Contains(got.Message(), token) {
					t.Fatalf("message %q carries the token", got.Message())
				}
				requireNoHostPath(t, got.Message(), b)
				requireNothingStored(t, b, id)
				e := eventFor(t, b, "peer_file_fetch", "handle_id", id)
				requireShape(t, b, e, fetchKeys, tc.code)
				requireReason(t, e, got.Message())
				requireField(t, e, "peer", f.Addr())
				requireNull(t, e, "stored_path", "bytes", "sha256")
			})
		}
		if n := f.requests("/resources/peer/" + redirectTarget); n != 0 {
			t.Fatalf("a redirect was followed (%d requests to its target)", n)
		}
	})

	t.Run("accepted", func(t *testing.T) {
		exact := strings.Repeat("e", 1024)
		for _, tc := range []struct {
			name    string
			peer    string
			handler http.HandlerFunc
			body    string
			keys    []string
		}{
			{"no etag and no generation", f.Addr(), withETags(body), body,
				[]string{"path", "bytes", "sha256", "peer"}},
			{"exactly the receive limit", f.Addr(), serveBytes([]byte(exact)), exact,
				[]string{"path", "bytes", "sha256", "generation", "peer"}},
			{"peer as a URL with a path", "http://" + f.Addr() + "/ignored/path", serveBytes([]byte(body)), body,
				[]string{"path", "bytes", "sha256", "generation", "peer"}},
			{"generation that is not a number is left out", f.Addr(), func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("x-murmur-generation", "-1")
				withETags(body, goodETag)(w, nil)
			}, body, []string{"path", "bytes", "sha256", "peer"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				token := forgeFor("report.md")
				id := handleID(token)
				f.handle(token, tc.handler)
				got := fetch(t, b, tc.peer, token)
				data := got.Data(t)
				harness.RequireKeys(t, "fetch-peer-file result", data, tc.keys...)
				var s stored
				_ = json.Unmarshal(data, &s)
				if s.Path != "peer-in/"+id+"-report.md" || s.Bytes != int64(len(tc.body)) || s.SHA256 != harness.SHA256Hex([]byte(tc.body)) || s.Peer != tc.peer {
					t.Fatalf("result %s", data)
				}
				if s.Generation != nil && *s.Generation != 7 {
					t.Fatalf("generation %d, want the peer's 7", *s.Generation)
				}
				if onDisk, err := os.ReadFile(filepath.Join(b.Ready.Workdir, s.Path)); err != nil || string(onDisk) != tc.body {
					t.Fatalf("stored %q, %v", onDisk, err)
				}
				requireNoTemp(t, b)
				if f.requests("/resources/peer/"+token) != 1 {
					t.Fatalf("the redeem did not go to /resources/peer/<handle> on the peer's host and port")
				}
				e := eventFor(t, b, "peer_file_fetch", "handle_id", id)
				requireShape(t, b, e, fetchKeys, "ok")
				requireField(t, e, "peer", tc.peer)
				requireField(t, e, "stored_path", s.Path)
				requireField(t, e, "bytes", len(tc.body))
				requireField(t, e, "sha256", s.SHA256)
			})
		}
		f.mu.Lock()
		asserted := f.auds[len(f.auds)-1]
		f.mu.Unlock()
		if asserted != b.Ready.Audience {
			t.Fatalf("x-murmur-audience %q, want the fetcher's own audience %q", asserted, b.Ready.Audience)
		}
	})

	t.Run("stored name is sanitised", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			token string
			want  string
		}{
			{"shell metacharacters", forgeFor("a b;rm -rf.md"), "a_b_rm_-rf.md"},
			{"climbing path", forgeFor("../../etc/passwd"), "passwd"},
			{"one _ per code point", forgeFor("dir/über résumé.md"), "_ber_r_sum_.md"},
			{"CJK", forgeFor("日本.txt"), "__.txt"},
			{"backslash", forgeFor(`a\b.md`), "a_b.md"},
			{"dot-dot", forgeFor(".."), "file"},
			{"dot", forgeFor("x/."), "file"},
			{"empty", forgeFor(""), "file"},
			{"trailing slash", forgeFor("dir/"), "file"},
			{"dotfile kept", forgeFor(".env"), ".env"},
			{"cut to 120 characters", forgeFor(strings.Repeat("n", 200)), strings.Repeat("n", 120)},
			{"no p in the payload", harness.ForgeToken(`{"v":1,"iss":"x"}`), "file"},
			{"non-string p", harness.ForgeToken(`{"p":5}`), "file"},
			{"payload not JSON", harness.ForgeToken(`not json`), "file"},
			{"not a handle at all", "just-a-name", "file"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := handleID(tc.token)
				f.handle(tc.token, serveBytes([]byte(body)))
				got := fetch(t, b, f.Addr(), tc.token)
				var s stored
				_ = json.Unmarshal(got.Data(t), &s)
				want := "peer-in/" + id + "-" + tc.want
				if s.Path != want {
					t.Fatalf("stored at %q, want %q", s.Path, want)
				}
				if onDisk, err := os.ReadFile(filepath.Join(b.Ready.Workdir, want)); err != nil || string(onDisk) != body {
					t.Fatalf("stored file: %q, %v", onDisk, err)
				}
				requireField(t, eventFor(t, b, "peer_file_fetch", "handle_id", id), "stored_path", want)
			})
		}
		requireNoTemp(t, b)
	})

	t.Run("a name that looks like a token is redacted in the trace", func(t *testing.T) {
		lookalike := "mh1.AAAA.BBBB"
		token := forgeFor(lookalike)
		id := handleID(token)
		f.handle(token, serveBytes([]byte(body)))
		var s stored
		_ = json.Unmarshal(fetch(t, b, f.Addr(), token).Data(t), &s)
		if s.Path != "peer-in/"+id+"-"+lookalike {
			t.Fatalf("stored at %q", s.Path)
		}
		e := eventFor(t, b, "peer_file_fetch", "handle_id", id)
		requireField(t, e, "stored_path", "peer-in/"+id+"-<handle:"+handleID(lookalike)+">")
	})

	t.Run("the agent never sees a partial file", func(t *testing.T) {
		token := forgeFor("slow.md")
		id := handleID(token)
		full := strings.Repeat("s", 1000)
		halfSent, release := make(chan struct{}), make(chan struct{})
		f.handle(token, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("etag", harness.ETag([]byte(full)))
			w.Header().Set("content-length", "1000")
			_, _ = w.Write([]byte(full[:500]))
			w.(http.Flusher).Flush()
			close(halfSent)
			<-release
			_, _ = w.Write([]byte(full[500:]))
		})
		type result struct {
			a   harness.Answer
			err error
		}
		done := make(chan result, 1)
		go func() {
			a, err := harness.ControlE(b.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]any{"peer": f.Addr(), "handle": token})
			done <- result{a, err}
		}()
		select {
		case <-halfSent:
		case <-time.After(10 * time.Second):
			t.Fatal("the fetch did not start within 10 s")
		}
		// Half the body is on its way into peer-in, into a file that has no name yet.
		time.Sleep(50 * time.Millisecond)
		whileStreaming := inbox(t, b)
		close(release)
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		for _, name := range whileStreaming {
			if strings.Contains(name, id) {
				t.Fatalf("peer-in held %q while the body streamed; want nothing named until the file is whole and verified", name)
			}
		}
		var s stored
		_ = json.Unmarshal(res.a.Data(t), &s)
		if onDisk, _ := os.ReadFile(filepath.Join(b.Ready.Workdir, s.Path)); string(onDisk) != full {
			t.Fatalf("stored %d bytes, want %d", len(onDisk), len(full))
		}
		requireNoTemp(t, b)
	})

	t.Run("https peers are verified", func(t *testing.T) {
		tlsPeer := newFakeTLSPeer(t)
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		must(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsPeer.srv.Certificate().Raw}), 0o644))
		trusting := startFetcher(t, "--peer-ca", caFile)
		url := "https://" + tlsPeer.Addr()

		token := forgeFor("secure.md")
		tlsPeer.handle(token, serveBytes([]byte(body)))
		got := fetch(t, b, url, token)
		harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "peer_unreachable")
		requireNothingStored(t, b, handleID(token))

		got = fetch(t, trusting, url, token)
		var s stored
		_ = json.Unmarshal(got.Data(t), &s)
		if s.Path != "peer-in/"+handleID(token)+"-secure.md" || s.Peer != url {
			t.Fatalf("fetch over TLS: %s", got.Raw)
		}
		// A plain-HTTP request to the TLS port is no answer either.
		harness.RequireControlRefusal(t, fetch(t, trusting, "http://"+tlsPeer.Addr(), forgeFor("x.md")), http.StatusUnprocessableEntity, "http_400")
	})

	// Last: it replaces peer-in.
	t.Run("peer-in that is a symlink is io_error", func(t *testing.T) {
		inboxDir := filepath.Join(b.Ready.Workdir, "peer-in")
		elsewhere := t.TempDir()
		must(t, os.Rename(inboxDir, inboxDir+".real"))
		fixture.Write(t, b.Ready.Workdir, fixture.Layout{"peer-in -> " + elsewhere: ""})
		token := forgeFor("report.md")
		f.handle(token, serveBytes([]byte(body)))
		harness.RequireControlRefusal(t, fetch(t, b, f.Addr(), token), http.StatusUnprocessableEntity, "io_error")
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Fatalf("a file was written through the peer-in symlink: %v", entries)
		}
		requireShape(t, b, eventFor(t, b, "peer_file_fetch", "handle_id", handleID(token)), fetchKeys, "io_error")
		must(t, os.Remove(inboxDir))
		must(t, os.Rename(inboxDir+".real", inboxDir))
	})

}
