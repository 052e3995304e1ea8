// Package peer_test is the black-box suite of the peer plane (docs/peer-plane.md): real
// resplane processes on loopback, raw HTTP over TCP to their listeners, their control sockets,
// the CLI, and fake peers (net/http/httptest) inside the test process.
//
// Every process the suite starts is registered; once every test has finished and every process
// has stopped, TestMain scans each trace file and each process's stderr for a handle token.
package peer_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// tokenPattern is what a handle token looks like anywhere it could leak (docs/trace.md,
// "Redaction").
var tokenPattern = regexp.MustCompile(`mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// proofPattern is what a DPoP proof looks like (a compact JWS whose header and claims are JSON
// objects, so both start with eyJ): its htu holds a token, and no proof is ever logged or
// traced (docs/peer-plane.md, "Proof of possession").
var proofPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+`)

// registry holds, for the final leak scan, a snapshot of every process the suite started
// (its trace files and stderr, taken after it stopped, before its temp dir is removed) and the
// stderr of every CLI run.
var registry struct {
	sync.Mutex
	sources []source
}

// source is one text that must hold no token.
type source struct {
	name string
	text string
}

// remember registers sources for the final leak scan.
func remember(sources ...source) {
	registry.Lock()
	defer registry.Unlock()
	registry.sources = append(registry.sources, sources...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if leaks, scanned := scanForTokens(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: a handle token or a proof leaked (docs/trace.md, Redaction: no token or proof in any trace or log line):\n%s\n",
			strings.Join(leaks, "\n"))
		code = 1
	} else if code == 0 {
		fmt.Fprintf(os.Stderr, "token leak scan: %d trace files and stderr streams, no token or proof\n", scanned)
	}
	os.Exit(code)
}

// scanForTokens scans every remembered source and returns one line per match, and how many
// sources it scanned.
func scanForTokens() (leaks []string, scanned int) {
	registry.Lock()
	defer registry.Unlock()
	for _, s := range registry.sources {
		scanned++
		leaks = append(leaks, tokensIn(s)...)
	}
	return leaks, scanned
}

// tokensIn returns one line for each line of s that holds a handle token, or any of also.
func tokensIn(s source, also ...string) []string {
	var found []string
	for _, line := range strings.Split(s.text, "\n") {
		m := tokenPattern.FindString(line)
		if m == "" {
			m = proofPattern.FindString(line)
		}
		for _, a := range also {
			if m == "" && strings.Contains(line, a) {
				m = a
			}
		}
		if m != "" {
			found = append(found, fmt.Sprintf("%s: %q in %s", s.name, m, line))
		}
	}
	return found
}

// textsOf returns what of p must hold no token: every trace file under its workdir (one per
// session that ran over it), its own trace wherever it is, and its stderr.
func textsOf(t testing.TB, p *harness.Process) []source {
	t.Helper()
	traces, _ := filepath.Glob(filepath.Join(p.Ready.Workdir, ".murmur", "*", "trace.jsonl"))
	if !slices.Contains(traces, p.Ready.Trace) {
		traces = append(traces, p.Ready.Trace)
	}
	var texts []source
	for _, path := range traces {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, source{"trace " + path, string(raw)})
	}
	return append(texts, source{"stderr of session " + p.Ready.SessionID, p.Stderr()})
}

// start launches a capsule and registers it for the leak scan. The test's temp dir is created
// first, so that its removal is registered before the snapshot of the process's texts and the
// snapshot before the process's stop: cleanups then run stop, snapshot, removal.
func start(t *testing.T, c harness.Capsule) *harness.Process {
	t.Helper()
	_ = t.TempDir()
	var p *harness.Process
	t.Cleanup(func() {
		if p != nil {
			p.Stop(t)
			remember(textsOf(t, p)...)
		}
	})
	p = harness.Start(t, c)
	return p
}

// cli runs the binary and registers its stderr for the leak scan.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cliWithInput(t, "", args...)
}

// cliWithInput is cli with stdin as the command's standard input.
func cliWithInput(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	code, stdout, stderr := harness.RunCLIWithInput(t, nil, stdin, args...)
	remember(source{"CLI stderr of " + strings.Join(args[:min(2, len(args))], " "), stderr})
	return code, stdout, stderr
}

// Manifests. Names carry capitals so the audience's lowercasing is exercised on every mint.
const (
	// manifestMinter declares the peer plane and lets the card fetch reach any port on
	// 127.0.0.1 (but not "localhost", which the allow-list tests use as the unlisted peer).
	manifestMinter = `name: Alpha
exports:
  peer_files:
    root: out/handoff/
    max_ttl: 1h
    max_bytes: 1Ki
capabilities:
  network:
    allow: ["127.0.0.1"]
`
	// manifestFetcher declares only peer_fetch, again for 127.0.0.1 alone.
	manifestFetcher = `name: Bravo
capabilities:
  peer_fetch:
    allow: ["127.0.0.1"]
`
	// manifestBare declares neither half of the peer plane.
	manifestBare = `name: Uniform
exports:
  files:
    root: out/
    mode: read-only
`
)

// minterFiles is the workdir layout of manifestMinter capsules.
func minterFiles() fixture.Layout {
	return fixture.Layout{
		"out/handoff/report.md":                   "# report\nbinary: \x00\x01\xfe\xff\n",
		"out/handoff/sub/deep.txt":                "deep\n",
		"out/handoff/alias.md -> report.md":       "",
		"out/handoff/link-out.md -> ../secret.md": "",
		"out/secret.md":                           "secret outside the peer root\n",
	}
}

func startMinter(t *testing.T, args ...string) *harness.Process {
	t.Helper()
	return start(t, harness.Capsule{Manifest: manifestMinter, Files: minterFiles(), Args: args})
}

func startFetcher(t *testing.T, args ...string) *harness.Process {
	t.Helper()
	return start(t, harness.Capsule{Manifest: manifestFetcher, Args: args})
}

// ---------------------------------------------------------------------------------------------
// Control API

// share calls share-file on p's control API.
func share(t *testing.T, p *harness.Process, input map[string]any) harness.Answer {
	t.Helper()
	return harness.Control(t, p.Ready.Control, http.MethodPost, "/v1/tools/share-file", input)
}

// fetch calls fetch-peer-file on p's control API.
func fetch(t *testing.T, p *harness.Process, peer, token string) harness.Answer {
	t.Helper()
	return harness.Control(t, p.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]any{"peer": peer, "handle": token})
}

// minted is share-file's result.
type minted struct {
	Handle      string `json:"handle"`
	HandleID    string `json:"handle_id"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
	Audience    string `json:"audience"`
}

// mint shares path of minter with peer and requires success.
func mint(t *testing.T, minter *harness.Process, peer, path string, ttl ...string) minted {
	t.Helper()
	input := map[string]any{"path": path, "peer": peer}
	if len(ttl) > 0 {
		input["ttl"] = ttl[0]
	}
	a := share(t, minter, input)
	var m minted
	if err := json.Unmarshal(a.Data(t), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// ---------------------------------------------------------------------------------------------
// Trace

// eventsFor returns p's trace events of type typ whose field key equals value ("" matches all).
func eventsFor(t *testing.T, p *harness.Process, typ, key, value string) []harness.Event {
	t.Helper()
	var out []harness.Event
	for _, e := range harness.Events(t, p.Ready.Trace) {
		if e.M["event_type"] != typ {
			continue
		}
		if key != "" && e.M[key] != value {
			continue
		}
		out = append(out, e)
	}
	return out
}

// countEvents counts p's trace events of type typ.
func countEvents(t *testing.T, p *harness.Process, typ string) int {
	t.Helper()
	return len(eventsFor(t, p, typ, "", ""))
}

// eventFor returns the one event of type typ whose field key equals value.
func eventFor(t *testing.T, p *harness.Process, typ, key, value string) harness.Event {
	t.Helper()
	events := eventsFor(t, p, typ, key, value)
	if len(events) != 1 {
		t.Fatalf("%d %s events with %s=%q in the trace, want exactly 1:\n%s", len(events), typ, key, value, rawLines(events))
	}
	return events[0]
}

// lastEventFor returns the last event of type typ whose field key equals value.
func lastEventFor(t *testing.T, p *harness.Process, typ, key, value string) harness.Event {
	t.Helper()
	events := eventsFor(t, p, typ, key, value)
	if len(events) == 0 {
		t.Fatalf("no %s event with %s=%q in the trace", typ, key, value)
	}
	return events[len(events)-1]
}

func rawLines(events []harness.Event) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Raw + "\n")
	}
	return b.String()
}

// The field lists of docs/trace.md, "Events", after the envelope.
var (
	mintKeys   = []string{"handle_id", "path", "audience", "expires_at_ms", "outcome", "reason"}
	redeemKeys = []string{"handle_id", "path", "generation", "audience_asserted", "bytes", "sha256", "outcome", "reason"}
	fetchKeys  = []string{"peer", "handle_id", "stored_path", "bytes", "sha256", "outcome", "reason"}
)

// requireShape checks e's envelope (docs/trace.md, "The envelope": order, ids, parent = session_start) and that its fields
// are exactly fields in order, and the outcome/reason rule.
func requireShape(t *testing.T, p *harness.Process, e harness.Event, fields []string, outcome string) {
	t.Helper()
	harness.RequireEnvelope(t, harness.SessionOf(t, p.Ready), e, e.Str(t, "event_type"), fields...)
	if e.M["outcome"] != outcome {
		t.Fatalf("outcome %v, want %s: %s", e.M["outcome"], outcome, e.Raw)
	}
	if outcome == "ok" {
		if e.M["reason"] != nil {
			t.Fatalf("reason on an ok event must be null: %s", e.Raw)
		}
	} else if s, ok := e.M["reason"].(string); !ok || s == "" {
		t.Fatalf("reason on a refusal must be its message: %s", e.Raw)
	}
}

// requireReason requires e's reason to be exactly the message the caller received
// (docs/trace.md).
func requireReason(t *testing.T, e harness.Event, message string) {
	t.Helper()
	if e.M["reason"] != message {
		t.Fatalf("trace reason %#v, want the refusal's message %q: %s", e.M["reason"], message, e.Raw)
	}
}

// requireNull requires each named field of e to be JSON null.
func requireNull(t *testing.T, e harness.Event, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, present := e.M[k]; !present || v != nil {
			t.Fatalf("trace field %s = %#v, want null: %s", k, v, e.Raw)
		}
	}
}

// requireField requires e's field key to equal want (strings compared as strings, numbers as
// their decimal text).
func requireField(t *testing.T, e harness.Event, key string, want any) {
	t.Helper()
	got := e.M[key]
	if n, ok := got.(json.Number); ok {
		got = n.String()
		want = fmt.Sprint(want)
	}
	if got != want {
		t.Fatalf("trace field %s = %#v, want %#v: %s", key, e.M[key], want, e.Raw)
	}
}

// ---------------------------------------------------------------------------------------------
// Handles

var b64 = base64.RawURLEncoding

// handleID is the first 16 hex characters of sha256(token) (docs/peer-plane.md, "The handle").
func handleID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// payloadOf decodes a token's payload segment without verifying anything.
func payloadOf(t *testing.T, token string) []byte {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token does not have three parts")
	}
	raw, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// forgeFor builds a hand-made token whose payload names p (JSON-encoded), with a fresh nonce.
func forgeFor(p string) string {
	pj, _ := json.Marshal(p)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return harness.ForgeToken(fmt.Sprintf(`{"v":1,"iss":"ses_fake","p":%s,"exp":%d,"n":"%x"}`, pj, time.Now().Add(time.Hour).UnixMilli(), nonce))
}

// ---------------------------------------------------------------------------------------------
// Raw redeem

// redeem sends a raw GET /resources/peer/<token> to p with the given header lines.
func redeem(t *testing.T, p *harness.Process, token string, headers ...string) harness.Response {
	t.Helper()
	return harness.Get(t, p.Ready.Listen, "/resources/peer/"+token, headers...)
}

// aud is an x-murmur-audience header line.
func aud(value string) string { return "x-murmur-audience: " + value }

// requireRefusal requires r to be a refusal under /resources/ (harness.RequireRefusal) that
// never carries x-murmur-export-root; with wantHandleID "" it requires no plane header at all
// (the answers before the declaration check), else x-murmur-generation and
// x-murmur-handle-id = wantHandleID. It returns the refusal's message.
func requireRefusal(t *testing.T, r harness.Response, status int, code string, wantHandleID string) string {
	t.Helper()
	msg := harness.RequireRefusal(t, r, status, code)
	if r.Has("x-murmur-export-root") {
		t.Fatalf("a peer-plane answer carries x-murmur-export-root: %v", r.Header)
	}
	if wantHandleID == "" {
		harness.RequireNoPlaneHeaders(t, r)
		return msg
	}
	if r.Get("x-murmur-generation") == "" {
		t.Fatalf("refusal %s lacks x-murmur-generation: %v", code, r.Header)
	}
	if got := r.Get("x-murmur-handle-id"); got != wantHandleID {
		t.Fatalf("x-murmur-handle-id %q, want %q", got, wantHandleID)
	}
	return msg
}

// ---------------------------------------------------------------------------------------------
// Fake peers

// fakePeer is an httptest server standing in for a peer capsule. It counts connections and
// records every request path, and answers from per-path handlers.
type fakePeer struct {
	srv   *httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	paths []string
	auds  []string
	route map[string]http.HandlerFunc
	card  http.HandlerFunc
}

func newFakePeer(t *testing.T) *fakePeer {
	t.Helper()
	return startFake(t, false)
}

// newFakeTLSPeer is a fake peer serving https with httptest's self-signed certificate.
func newFakeTLSPeer(t *testing.T) *fakePeer {
	t.Helper()
	return startFake(t, true)
}

func startFake(t *testing.T, useTLS bool) *fakePeer {
	t.Helper()
	f := &fakePeer{route: map[string]http.HandlerFunc{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected
	if useTLS {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

// Addr is the fake peer's host:port on 127.0.0.1.
func (f *fakePeer) Addr() string { return f.srv.Listener.Addr().String() }

// Port is the fake peer's port.
func (f *fakePeer) Port() string { _, port, _ := net.SplitHostPort(f.Addr()); return port }

// handle routes GET /resources/peer/<token> to h.
func (f *fakePeer) handle(token string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.route["/resources/peer/"+token] = h
}

// setCard makes the fake serve h at /.well-known/agent-card.json.
func (f *fakePeer) setCard(h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.card = h
}

// requests returns how many requests arrived for path.
func (f *fakePeer) requests(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.paths {
		if p == path {
			n++
		}
	}
	return n
}

func (f *fakePeer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.EscapedPath())
	f.auds = append(f.auds, r.Header.Get("x-murmur-audience"))
	h, card := f.route[r.URL.EscapedPath()], f.card
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/.well-known/agent-card.json" && card != nil:
		card(w, r)
	case h != nil:
		h(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// serveBytes answers 200 with body, a correct etag and x-murmur-generation 7.
func serveBytes(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/octet-stream")
		w.Header().Set("etag", harness.ETag(body))
		w.Header().Set("x-murmur-generation", "7")
		_, _ = w.Write(body)
	}
}

// cardJSON answers 200 with the given card body.
func cardJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

// closedPort returns a 127.0.0.1 address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// ---------------------------------------------------------------------------------------------
// peer-in

// inbox lists the names in <workdir>/peer-in ("" slice when it does not exist).
func inbox(t *testing.T, p *harness.Process) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.Ready.Workdir, "peer-in"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// requireNoTemp requires peer-in to hold no temp file (.<id>-<random>.part).
func requireNoTemp(t *testing.T, p *harness.Process) {
	t.Helper()
	for _, name := range inbox(t, p) {
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".part") {
			t.Fatalf("a temp file remains in peer-in: %q (all: %q)", name, inbox(t, p))
		}
	}
}

// requireNothingStored requires that no file for handle id exists in peer-in, and no temp.
func requireNothingStored(t *testing.T, p *harness.Process, id string) {
	t.Helper()
	requireNoTemp(t, p)
	for _, name := range inbox(t, p) {
		if strings.HasPrefix(name, id) {
			t.Fatalf("peer-in holds %q although the fetch failed", name)
		}
	}
}

// requireNoHostPath requires that text names neither workdir nor any absolute temp path.
func requireNoHostPath(t *testing.T, text string, p *harness.Process) {
	t.Helper()
	if strings.Contains(text, p.Ready.Workdir) || strings.Contains(text, os.TempDir()) {
		t.Fatalf("text names a host path: %q", text)
	}
}
