package resplane_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/adapters/memtrace"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/test/harness"
)

// component is the whole application assembled by InitializeHandlers over the in-memory
// filesystem, a manual clock, a trace recorder and a fake peer card, with the real resource
// edge (echo, raw-target listener, hardening) on a loopback port.
type component struct {
	fs      *memfs.FS
	clock   *clock.Manual
	trace   *memtrace.Recorder
	addr    string
	control http.Handler
}

const componentManifest = `name: reporter
exports:
  files:
    root: out/
    mode: read-only
  peer_files:
    root: out/
    max_ttl: 1h
capabilities:
  network:
    allow: [localhost]
`

// peerCard is a fake peer whose card names it "collector" at localhost:9.
type peerCard struct{}

func (peerCard) FetchCard(context.Context, destination.Peer) (ports.PeerCard, error) {
	return ports.PeerCard{Name: "collector", URL: "http://localhost:9"}, nil
}

func newComponent(t *testing.T) *component {
	t.Helper()
	manifestPath := filepath.Join(t.TempDir(), "murmur.yaml")
	if err := os.WriteFile(manifestPath, []byte(componentManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, d := config.LoadManifest(manifestPath)
	if d != nil {
		t.Fatal(d.Render())
	}
	c := &component{
		fs:    memfs.New("/srv/capsule"),
		clock: clock.NewManual(time.UnixMilli(1_800_000_000_000)),
		trace: &memtrace.Recorder{},
	}
	b, err := budget.New("--read-buffer-budget", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	l := resplane.Launch{
		Manifest: m, Identity: resplane.Identity{SessionID: "ses_component"}, Containment: containment.Sealed,
		Network: resplane.Network{AdvertiseURL: "http://localhost:8", Audience: "reporter@localhost:8"},
		Log:     zerolog.Nop(),
	}
	h, err := resplane.InitializeHandlers(l, resplane.HandlerPorts{
		FS: c.fs, Budgets: application.Budgets{Memory: b}, Clock: c.clock, Trace: c.trace,
		Key: keys.NewFixed([32]byte{42}), Nonces: keys.FixedNonce{7}, Cards: peerCard{},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.control = h.Control.NewEcho()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpapi.NewEcho(h.Resources, zerolog.Nop())}
	limits.Harden(srv, limits.Options{})
	go func() { _ = srv.Serve(limits.Listen(ln, limits.Caps{})) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.addr = ln.Addr().String()
	return c
}

// call sends one control API request in process and decodes the JSON answer.
func (c *component) call(t *testing.T, method, route, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.control.ServeHTTP(rec, httptest.NewRequest(method, route, strings.NewReader(body)))
	var answer map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatalf("%s %s answered %q: %v", method, route, rec.Body.Bytes(), err)
	}
	return rec.Code, answer
}

func TestComponentHandleRedeemsUntilTheMillisecondItExpires(t *testing.T) {
	c := newComponent(t)
	if err := c.fs.WriteFile("out/report.md", []byte("# report\n"), c.clock.Now()); err != nil {
		t.Fatal(err)
	}
	status, answer := c.call(t, http.MethodPost, "/v1/tools/share-file", `{"path":"report.md","peer":"localhost:9","ttl":"30s"}`)
	if status != http.StatusOK {
		t.Fatalf("share-file answered %d %v", status, answer)
	}
	data := answer["data"].(map[string]any)
	token := data["handle"].(string)
	if data["audience"] != "collector@localhost:9" || data["expires_at_ms"] != float64(1_800_000_030_000) {
		t.Fatalf("share-file data %v", data)
	}
	redeem := func() harness.Response {
		return harness.Get(t, c.addr, "/resources/peer/"+token, "x-murmur-audience: collector@localhost:9")
	}
	if r := redeem(); r.Status != 200 || string(r.Body) != "# report\n" {
		t.Fatalf("redeem at mint time: %d %q", r.Status, r.Body)
	}
	c.clock.Advance(30*time.Second - time.Millisecond)
	if r := redeem(); r.Status != 200 {
		t.Fatalf("redeem one millisecond before exp: %d %s", r.Status, r.Body)
	}
	c.clock.Advance(time.Millisecond)
	if r := redeem(); r.Status != http.StatusGone || !strings.Contains(string(r.Body), `"handle_expired"`) {
		t.Fatalf("redeem at exp: %d %s; want 410 handle_expired", r.Status, r.Body)
	}
	if n := len(c.trace.OfType("peer_handle_redeem")); n != 3 {
		t.Fatalf("%d redeem events; want one per redeem", n)
	}
}

func TestComponentGenerationMovesOnlyThroughTheControlAPI(t *testing.T) {
	c := newComponent(t)
	if err := c.fs.WriteFile("out/a.txt", []byte("A"), c.clock.Now()); err != nil {
		t.Fatal(err)
	}
	before := harness.Get(t, c.addr, "/resources/files/a.txt")
	for _, state := range []string{"completed", "failed", "cancelled"} {
		if status, answer := c.call(t, http.MethodPost, "/v1/tasks/terminal", `{"state":"`+state+`"}`); status != 200 {
			t.Fatalf("terminal %s: %d %v", state, status, answer)
		}
	}
	if status, answer := c.call(t, http.MethodPost, "/v1/tasks/terminal", `{"state":"paused"}`); status != 422 || answer["error"] != "invalid_input" {
		t.Fatalf("terminal paused: %d %v; want 422 invalid_input", status, answer)
	}
	after := harness.Get(t, c.addr, "/resources/files/a.txt")
	if before.Get("x-murmur-generation") != "0" || after.Get("x-murmur-generation") != "3" || before.Get("etag") != after.Get("etag") {
		t.Fatalf("generation %s -> %s, etag %s -> %s; want 0 -> 3 with the same etag",
			before.Get("x-murmur-generation"), after.Get("x-murmur-generation"), before.Get("etag"), after.Get("etag"))
	}
	if _, status := c.call(t, http.MethodGet, "/v1/status", ""); status["generation"] != float64(3) {
		t.Fatalf("status %v", status)
	}
}

func TestComponentRawTargetsReachTheRulesOverMemfs(t *testing.T) {
	c := newComponent(t)
	if err := c.fs.WriteFile("out/100%", []byte("percent"), c.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.fs.MakeFIFO("out/pipe"); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{
		"/resources/files/100%":         200,
		"/resources/files/%zz":          404,
		"/resources/files/%2e%2e/x":     403,
		"/resources/files/pipe":         403,
		"/resources/files/100%25?x=../": 200,
	} {
		if r := harness.Get(t, c.addr, target); r.Status != want {
			t.Errorf("GET %s = %d %s; want %d", target, r.Status, r.Body, want)
		}
	}
}
