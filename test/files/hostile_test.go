package files_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// hostile is a fake service that lies in every way the client must survive: a listing with
// paths that would leave the target directory, a body that does not match its etag, a body
// shorter than its content-length, a 5xx and a redirect. Every path it does not know is
// answered with the "evil" bytes and their true etag, so a client that asked for a path it
// should have refused, and wrote what came back, would be caught.
type hostile struct {
	mu        sync.Mutex
	requested []string
}

const evil = "evil bytes\n"

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// rootEscape is an absolute path the listing names; it must never be created.
var rootEscape = fmt.Sprintf("/resplane-hostile-%d.txt", os.Getpid())

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requested = append(h.requested, r.RequestURI)
	h.mu.Unlock()
	switch r.RequestURI {
	case "/resources/files":
		var entries []map[string]any
		for _, p := range []string{"ok.txt", "../escape.txt", rootEscape, "a/../../up.txt", "./dot.txt", "a//b.txt",
			"link/through.txt", "bad-etag.txt", "short.txt", "err.txt", "redirect.txt"} {
			entries = append(entries, map[string]any{"path": p, "size_bytes": len(evil), "mtime_ms": 1, "sha256": sum(evil)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"root": "out/", "max_bytes": 1024, "entries": entries})
	case "/resources/files/ok.txt":
		w.Header().Set("etag", `"sha256:`+sum("fine\n")+`"`)
		_, _ = w.Write([]byte("fine\n"))
	case "/resources/files/bad-etag.txt":
		w.Header().Set("etag", `"sha256:`+sum("what the listing promised")+`"`)
		_, _ = w.Write([]byte(evil))
	case "/resources/files/short.txt":
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\netag: \"sha256:%s\"\r\nContent-Length: %d\r\n\r\n%s", sum(evil), len(evil)+100, evil)
			_ = buf.Flush()
			conn.Close()
		}
	case "/resources/files/err.txt":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"io_error","message":"The file could not be opened or read."}`))
	case "/resources/files/redirect.txt":
		http.Redirect(w, r, "/resources/files/ok.txt", http.StatusFound)
	default:
		w.Header().Set("etag", `"sha256:`+sum(evil)+`"`)
		_, _ = w.Write([]byte(evil))
	}
}

func TestAHostileServiceNeverMakesThePullWriteOutsideOrLandAWrongFile(t *testing.T) {
	h := &hostile{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base := t.TempDir()
	fixture.Write(t, base, fixture.Layout{
		"mirror/bad-etag.txt":       "the earlier good copy\n",
		"mirror/link -> ../outside": "",
		"outside/":                  "",
	})
	dir := filepath.Join(base, "mirror")

	code, s, stderr := pull(t, srv.URL, dir)
	if code != 1 || s.Fetched != 1 || s.Failed != 10 || s.Bytes != int64(len("fine\n")) {
		t.Fatalf("exit %d, %+v; want exit 1, ok.txt fetched and 10 failed; stderr:\n%s", code, s, stderr)
	}
	for _, want := range []string{
		"../escape.txt: unsafe_path", "link/through.txt: unsafe_path", "bad-etag.txt: etag_mismatch",
		"short.txt: service_unreachable", "err.txt: io_error", "redirect.txt: http_302",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if got := tree(t, base); !maps.Equal(got, map[string]string{
		"mirror/ok.txt": "fine\n", "mirror/bad-etag.txt": "the earlier good copy\n", "mirror/link": "-> ../outside",
	}) {
		t.Fatalf("the pull left %v", got)
	}
	if _, err := os.Lstat(rootEscape); !os.IsNotExist(err) {
		t.Fatalf("%s exists: %v", rootEscape, err)
	}
	h.mu.Lock()
	requested := slices.Clone(h.requested)
	h.mu.Unlock()
	for _, target := range requested {
		if strings.Contains(target, "..") || strings.Contains(target, "resplane-hostile") || strings.Contains(target, "link") ||
			strings.Contains(target, "/./") || strings.Contains(target, "//b") {
			t.Errorf("the client requested %q, a path it had to refuse", target)
		}
	}
	if n := len(slices.DeleteFunc(requested, func(r string) bool { return r != "/resources/files/ok.txt" })); n != 1 {
		t.Errorf("ok.txt was requested %d times; the redirect to it must not be followed", n)
	}
}

func TestGetNeverLandsABodyThatFailsItsChecks(t *testing.T) {
	srv := httptest.NewServer(&hostile{})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for _, tc := range []struct{ path, code string }{
		{"bad-etag.txt", "etag_mismatch"}, {"short.txt", "service_unreachable"}, {"err.txt", "io_error"}, {"redirect.txt", "http_302"},
	} {
		target := filepath.Join(dir, tc.path)
		code, stdout, stderr := harness.RunCLI(t, nil, "files", "get", srv.URL, tc.path, "-o", target)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.path+": "+tc.code+": ") {
			t.Errorf("get %s: exit %d, stdout %q, stderr %q; want exit 1 with %s", tc.path, code, stdout, stderr, tc.code)
		}
		code, stdout, _ = harness.RunCLI(t, nil, "files", "get", srv.URL, tc.path, "-o", "-")
		if code != 1 || stdout != "" {
			t.Errorf("get %s -o -: exit %d, stdout %q; want exit 1 and nothing written", tc.path, code, stdout)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed get left %v", entries)
	}
}

// deepListing is a fake service whose listing names ok.txt, a path of 20,000 components
// (longer than any path a service serves) and one of 300 components in 600 bytes (deeper
// than a service lists): the shapes that would make a pull create thousands of nested
// directories and a later `pull --delete` fail with too many open files.
type deepListing struct{}

var deepPaths = []string{strings.Repeat("d/", 19_999) + "x.txt", strings.Repeat("d/", 299) + "x"}

func (deepListing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI != "/resources/files" {
		w.Header().Set("etag", `"sha256:`+sum(evil)+`"`)
		_, _ = w.Write([]byte(evil))
		return
	}
	entries := []map[string]any{
		{"path": "ok.txt", "size_bytes": len(evil), "mtime_ms": 1, "sha256": sum(evil)},
	}
	for _, p := range deepPaths {
		entries = append(entries, map[string]any{"path": p, "size_bytes": len(evil), "mtime_ms": 1, "sha256": sum(evil)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"root": "out/", "max_bytes": 1024, "entries": entries})
}

func TestAListedPathDeeperThanAServiceListsCreatesNothingAndDeleteStillWorks(t *testing.T) {
	srv := httptest.NewServer(deepListing{})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"stale.txt": "gone after --delete"})
	for i, want := range []int{1, 0} {
		code, s, stderr := pull(t, srv.URL, dir, "--delete")
		if code != 1 || s.Fetched != 1-i || s.Unchanged != i || s.Deleted != want || s.Failed != 2 ||
			strings.Count(stderr, ": invalid_listing: ") != 2 || !strings.Contains(stderr, "none longer than 4096") ||
			!strings.Contains(stderr, "none deeper than 257") {
			t.Fatalf("pull %d: exit %d, %+v; want exit 1, both deep entries failed invalid_listing, stale.txt deleted once; stderr:\n%s",
				i+1, code, s, stderr)
		}
		if got := tree(t, dir); !maps.Equal(got, map[string]string{"ok.txt": evil}) {
			t.Fatalf("pull %d left %v", i+1, got)
		}
		if _, err := os.Lstat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
			t.Fatalf("pull %d created a directory for the deep entry: %v", i+1, err)
		}
	}
}
