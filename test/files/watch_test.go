package files_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// watchInterval is the --interval the watch tests run at: the shortest a watch accepts.
const watchInterval = 200 * time.Millisecond

// cycle is one NDJSON line of `pull --watch --json`, decoded strictly.
type cycle struct {
	summary
	AtMs int64 `json:"at_ms"`
}

// cycles decodes every line stdout holds, each with exactly the documented keys.
func cycles(t *testing.T, stdout string) []cycle {
	t.Helper()
	var out []cycle
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		harness.RequireKeys(t, "watch cycle", []byte(line), "fetched", "unchanged", "deleted", "failed", "skipped", "bytes", "at_ms")
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var c cycle
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("watch printed %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out
}

// waitForTree waits up to limit for dir to hold exactly want, and returns how long it took.
func waitForTree(t *testing.T, dir string, want map[string]string, limit time.Duration, c *harness.CLI) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		// A file the watch removes meanwhile fails the walk: look again, as for a missing dir.
		got, err := readTree(dir)
		if err != nil {
			got = map[string]string{}
		}
		same := len(got) == len(want)
		for p, content := range want {
			same = same && got[p] == content
		}
		if same {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v the mirror holds %v, want %v; watch stderr:\n%s", limit, got, want, c.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAWatchFollowsTheExportAndAServiceRestartedOnItsAddress runs `pull --watch --delete
// --json`: a rewrite, an addition, a deletion and a rename on the service reach the mirror
// within two intervals; the service stopped and relaunched on the same address is said once
// and followed again; SIGINT exits 0; the NDJSON lines parse and add up.
func TestAWatchFollowsTheExportAndAServiceRestartedOnItsAddress(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{
		"out/a.txt": "a\n", "out/b.txt": "b\n", "out/keep.txt": "keep\n", "out/old.txt": "old\n"}})
	out, dir := filepath.Join(p.Workdir, "out"), filepath.Join(t.TempDir(), "mirror")
	watch := harness.StartCLI(t, nil, "files", "pull", "--watch", "--interval", watchInterval.String(), "--delete", "--json", p.Ready.URL, dir)
	waitForTree(t, dir, tree(t, out), 10*time.Second, watch)

	if err := os.WriteFile(filepath.Join(out, "a.txt"), []byte("rewritten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, p.Workdir, fixture.Layout{"out/new/c.txt": "c\n"})
	if err := os.Remove(filepath.Join(out, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(out, "old.txt"), filepath.Join(out, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	// Two intervals, and a second for a loaded machine to run the cycle.
	took := waitForTree(t, dir, tree(t, out), 2*watchInterval+time.Second, watch)
	t.Logf("the mirror followed a rewrite, an addition, a deletion and a rename in %v (interval %v)", took, watchInterval)

	listen, manifestPath := p.Ready.Listen, filepath.Join(p.Dir, "murmur.yaml")
	p.Stop(t)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(watch.Stderr(), "retrying"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watch never said the service went away; stderr:\n%s", watch.Stderr())
		}
	}
	time.Sleep(3 * watchInterval) // further failed listings, which must not be said again
	if err := os.WriteFile(filepath.Join(out, "keep.txt"), []byte("after the restart\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.Serve(t, nil, "--manifest", manifestPath, "--workdir", p.Workdir, "--listen", listen)
	waitForTree(t, dir, tree(t, out), 2*operatorMaxBackoff, watch)

	if code := watch.Interrupt(t); code != 0 {
		t.Fatalf("SIGINT: exit %d, want 0; stderr:\n%s", code, watch.Stderr())
	}
	stderr := watch.Stderr()
	if n := strings.Count(stderr, "retrying"); n != 1 {
		t.Fatalf("the lost service was said %d times, want once; stderr:\n%s", n, stderr)
	}
	if n := strings.Count(stderr, "answers again"); n != 1 {
		t.Fatalf("the service's return was said %d times, want once; stderr:\n%s", n, stderr)
	}
	var fetched, deleted, failed int
	var bytes int64
	var last int64
	for _, c := range cycles(t, watch.Stdout()) {
		fetched, deleted, failed, bytes = fetched+c.Fetched, deleted+c.Deleted, failed+c.Failed, bytes+c.Bytes
		if c.AtMs < last || c.Fetched+c.Deleted+c.Failed == 0 {
			t.Fatalf("cycle %+v: at_ms goes back or nothing changed", c)
		}
		last = c.AtMs
	}
	// 4 at first; a.txt, new/c.txt and renamed.txt; keep.txt after the restart.
	wantBytes := int64(len("a\nb\nkeep\nold\n") + len("rewritten\nc\nold\n") + len("after the restart\n"))
	if fetched != 8 || deleted != 2 || failed != 0 || bytes != wantBytes {
		t.Fatalf("the cycles add up to %d fetched, %d deleted, %d failed, %d bytes; want 8, 2, 0, %d; stdout:\n%s",
			fetched, deleted, failed, bytes, wantBytes, watch.Stdout())
	}
}

// operatorMaxBackoff is the longest a watch waits between two tries (docs/operator-guide.md,
// "Watching an export").
const operatorMaxBackoff = 30 * time.Second

// trickle is a fake service listing one large file whose body it sends 64 KiB of, then holds
// until the client goes away.
type trickle struct{ started atomic.Bool }

func (tr *trickle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const size = 1 << 20
	switch r.RequestURI {
	case "/resources/files":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"root": "out/", "max_bytes": size, "entries": []map[string]any{
			{"path": "big.bin", "size_bytes": size, "mtime_ms": 1, "sha256": sum(strings.Repeat("x", size))}}})
	case "/resources/files/big.bin":
		w.Header().Set("etag", `"sha256:`+sum(strings.Repeat("x", size))+`"`)
		w.Header().Set("Content-Length", "1048576")
		_, _ = w.Write(bytes.Repeat([]byte("x"), 64<<10))
		w.(http.Flusher).Flush()
		tr.started.Store(true)
		<-r.Context().Done()
	default:
		http.NotFound(w, r)
	}
}

// TestSIGINTMidFetchLeavesNoPartialFile interrupts a watch while a body is half received: it
// exits 0 and the directory holds nothing, not even a temp file.
func TestSIGINTMidFetchLeavesNoPartialFile(t *testing.T) {
	service := &trickle{}
	server := httptest.NewServer(service)
	defer server.Close()
	dir := t.TempDir()
	watch := harness.StartCLI(t, nil, "files", "pull", "--watch", "--json", server.URL, dir)
	for deadline := time.Now().Add(10 * time.Second); !service.started.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fetch never started; stderr:\n%s", watch.Stderr())
		}
	}
	time.Sleep(50 * time.Millisecond)
	if code := watch.Interrupt(t); code != 0 {
		t.Fatalf("SIGINT mid-fetch: exit %d, want 0; stderr:\n%s", code, watch.Stderr())
	}
	if files := tree(t, dir); len(files) != 0 {
		t.Fatalf("an interrupted fetch left %v in the directory", files)
	}
	if watch.Stdout() != "" {
		t.Fatalf("a cycle that changed nothing printed %q", watch.Stdout())
	}
}
