package resplane_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/logging"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/handle"
)

// BenchmarkServe answers one GET of a 1 KiB file on each plane through the whole resource
// edge in process — echo, the access log (redacting logger, to io.Discard), the use case, the
// trace line (jsonl, to a file) and the response — so the two differ only in what a redeem
// adds to a read: the handle checks, the handle id and the peer event. The pair is the
// in-process half of the redeem/read ratio (docs/benchmarks.md); CPU-profile it with
// -cpuprofile to see where a redeem's extra time goes.
func BenchmarkServe(b *testing.B) {
	dir := b.TempDir()
	manifestPath := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(manifestPath, []byte(componentManifest), 0o600); err != nil {
		b.Fatal(err)
	}
	m, _, d := config.LoadManifest(manifestPath)
	if d != nil {
		b.Fatal(d.Render())
	}
	fs := memfs.New("/srv/capsule")
	now := time.UnixMilli(1_800_000_000_000)
	if err := fs.WriteFile("out/one.bin", []byte(strings.Repeat("x", 1024)), now); err != nil {
		b.Fatal(err)
	}
	clk := clock.NewManual(now)
	out, err := os.OpenFile(filepath.Join(dir, "trace.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	sink, err := jsonl.Open(jsonl.Config{File: out, SessionID: "ses_component", Clock: clk, Redact: handle.Redact})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sink.Close() })
	mem, err := budget.New("--read-buffer-budget", 64<<20)
	if err != nil {
		b.Fatal(err)
	}
	key := [32]byte{42}
	l := resplane.Launch{
		Manifest: m, Identity: resplane.Identity{SessionID: "ses_component"}, Containment: containment.Sealed,
		Network: resplane.Network{AdvertiseURL: "http://localhost:8", Audience: "reporter@localhost:8"},
	}
	h, err := resplane.InitializeHandlers(l, resplane.HandlerPorts{
		FS: fs, Budgets: application.Budgets{Memory: mem}, Clock: clk, Trace: sink,
		Key: keys.NewFixed(key), Nonces: keys.FixedNonce{7}, Cards: peerCard{},
	})
	if err != nil {
		b.Fatal(err)
	}
	logger, err := logging.New(io.Discard, "info", "json")
	if err != nil {
		b.Fatal(err)
	}
	e := httpapi.NewEcho(h.Resources, logger)
	const audience = "collector@localhost:9"
	token := handle.Mint(key[:], handle.NewPayload("ses_component", "one.bin", now.Add(time.Hour).UnixMilli(), [16]byte{7}), audience)

	read := httptest.NewRequest(http.MethodGet, "/resources/files/one.bin", nil)
	redeem := httptest.NewRequest(http.MethodGet, "/resources/peer/"+token, nil)
	redeem.Header.Set("x-murmur-audience", audience)
	read.Host, redeem.Host = "localhost:8", "localhost:8" // the service answers its own names only
	for _, c := range []struct {
		name string
		req  *http.Request
	}{{"read", read}, {"redeem", redeem}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, c.req)
				if rec.Code != http.StatusOK || rec.Body.Len() != 1024 {
					b.Fatalf("status %d, %d bytes: %s", rec.Code, rec.Body.Len(), rec.Body.String())
				}
			}
		})
	}
}
