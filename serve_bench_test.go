package resplane_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/logging"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
)

// BenchmarkServe answers one GET of a 1 KiB file on each plane through the whole resource
// edge in process — echo, the access log (the service's logger, to a file), the use case, the
// file opened and read by osfs from the real filesystem, the trace line (jsonl, to a file) and
// the response — so the two differ only in what a redeem adds to a read: the handle checks,
// the handle id and the peer event. The pair is the
// in-process half of the redeem/read ratio (docs/benchmarks.md); CPU-profile it with
// -cpuprofile to see where a redeem's extra time goes.
func BenchmarkServe(b *testing.B) {
	e, key, now := benchEdge(b)
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

// BenchmarkRedeemProof answers one redeem of a 1 KiB file through the whole resource edge in
// process, as BenchmarkServe does: a handle bound to a proof key, redeemed with a fresh DPoP
// proof each time (docs/peer-plane.md, "Proof of possession"), against an unbound one
// redeemed without a proof. The difference is the proof's whole cost: its JOSE parse and
// Ed25519 verification, the second HMAC and the replay memory (docs/benchmarks.md breaks it
// down). The proofs are made before the timer starts, one per iteration, so none is a replay.
func BenchmarkRedeemProof(b *testing.B) {
	e, key, now := benchEdge(b)
	const audience = "collector@localhost:9"
	prover, err := dpop.NewProver(keys.NewFixedProofKey([32]byte{5}))
	if err != nil {
		b.Fatal(err)
	}
	payload := handle.NewPayload("ses_component", "one.bin", now.Add(time.Hour).UnixMilli(), [16]byte{7})
	signer := handle.NewSigner(key[:])
	unbound := signer.Mint(payload, audience)
	bound := signer.MintBound(payload, audience, handle.Thumbprint(prover.PublicKey()))
	request := func(token, proofText string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, handle.RedeemPath(token), nil)
		r.Host = "localhost:8"
		r.Header.Set("x-murmur-audience", audience)
		if proofText != "" {
			r.Header.Set("DPoP", proofText)
		}
		return r
	}
	serve := func(b *testing.B, r *http.Request) {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK || rec.Body.Len() != 1024 {
			b.Fatalf("status %d, %d bytes: %s", rec.Code, rec.Body.Len(), rec.Body.String())
		}
	}
	b.Run("unbound", func(b *testing.B) {
		r := request(unbound, "")
		b.ReportAllocs()
		for b.Loop() {
			serve(b, r)
		}
	})
	b.Run("bound", func(b *testing.B) {
		requests := make([]*http.Request, b.N)
		for i := range requests {
			p, err := prover.Prove(http.MethodGet, "http://localhost:8"+handle.RedeemPath(bound), now)
			if err != nil {
				b.Fatal(err)
			}
			requests[i] = request(bound, p)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			serve(b, requests[i])
		}
	})
}

// benchKey is the instance key of the in-process benchmarks.
var benchKey = [32]byte{42}

// benchEdge builds the whole resource edge in process over a 1 KiB file, out/one.bin, for the
// benchmarks: the use cases under the instance key benchKey, on osfs, with a manual clock
// stopped at the instant it returns, the trace and the access log (the service's logger)
// each written to a file, as serve writes them.
func benchEdge(b *testing.B) (*echo.Echo, [32]byte, time.Time) {

	dir := b.TempDir()
	manifestPath := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(manifestPath, []byte(componentManifest), 0o600); err != nil {
		b.Fatal(err)
	}
	m, _, d := config.LoadManifest(manifestPath)
	if d != nil {
		b.Fatal(d.Render())
	}
	now := time.UnixMilli(1_800_000_000_000)
	wd := filepath.Join(dir, "wd")
	one := filepath.Join(wd, "out", "one.bin")
	if err := os.MkdirAll(filepath.Dir(one), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(one, []byte(strings.Repeat("x", 1024)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Chtimes(one, now, now); err != nil {
		b.Fatal(err)
	}
	fs, err := osfs.New(wd)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fs.Close() })
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
	key := benchKey
	l := resplane.Launch{
		Manifest: m, Identity: resplane.Identity{SessionID: "ses_component"}, Containment: containment.Sealed,
		Network: resplane.Network{AdvertiseURL: "http://localhost:8", Audience: "reporter@localhost:8", PeerProof: proof.Auto},
	}
	h, err := resplane.InitializeHandlers(l, resplane.HandlerPorts{
		FS: fs, Budgets: application.Budgets{Memory: mem}, Clock: clk, Trace: sink,
		Key: keys.NewFixed(key), Nonces: keys.FixedNonce{7}, Cards: peerCard{},
	})
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stderr.Close() })
	logger, batch, err := logging.NewService(stderr, "info", "json")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = batch.Close() })
	e := httpapi.NewEcho(h.Resources, logger)
	return e, key, now
}
