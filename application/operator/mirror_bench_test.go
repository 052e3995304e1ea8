package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/operatorhttp"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/terminal"
	"github.com/resplane/resplane/application/operator"
)

// BenchmarkPullOverLatency pulls 100 files of 16 KiB through the real HTTP client and local
// mirror from a service that takes 2 ms to answer each request, as a service across a network
// does, with 1, 4 and 8 jobs side by side
// (docs/decisions/0043-pull-fetches-four-files-at-a-time.md). Loopback has no such latency, so
// BenchmarkPull in test/files cannot show what parallel fetches buy on a real network.
func BenchmarkPullOverLatency(b *testing.B) {
	const files, size, latency = 100, 16 << 10, 2 * time.Millisecond
	body := strings.Repeat("x", size)
	var entries []map[string]any
	for i := range files {
		entries = append(entries, map[string]any{"path": fmt.Sprintf("f%03d", i), "size_bytes": size, "mtime_ms": 1, "sha256": sum(body)})
	}
	listing, _ := json.Marshal(map[string]any{"max_bytes": size, "entries": entries})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		if r.URL.Path == "/resources/files" {
			_, _ = w.Write(listing)
			return
		}
		w.Header().Set("etag", `"sha256:`+sum(body)+`"`)
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)
	client, err := operatorhttp.New(srv.URL, operatorhttp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, jobs := range []int{1, 4, 8} {
		b.Run("jobs="+strconv.Itoa(jobs), func(b *testing.B) {
			b.SetBytes(files * size)
			for i := range b.N {
				dir, err := osfs.OpenMirror(filepath.Join(b.TempDir(), strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				m := operator.NewMirror(operator.NewRemoteFiles(client), dir, terminal.Silent{})
				s, err := m.Pull(context.Background(), operator.PullOptions{Jobs: jobs})
				dir.Close()
				if err != nil || s.Fetched != files {
					b.Fatalf("pull: %+v, %v", s, err)
				}
			}
		})
	}
}
