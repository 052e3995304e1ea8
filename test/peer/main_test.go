// Package peer_test is the black-box suite of the peer plane (contract §6, §7, §8, §9): real
// resplane processes on loopback, raw HTTP over TCP to their listeners, their control sockets,
// the CLI, and fake peers (net/http/httptest) inside the test process.
//
// Every process the suite starts is registered; once every test has finished and every process
// has stopped, TestMain scans each trace file and each process's stderr for a handle token.
package peer_test

import (
	"bytes"
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

// tokenPattern is what a handle token looks like anywhere it could leak (contract §9).
var tokenPattern = regexp.MustCompile(`mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

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

func remember(name, text string) {
	registry.Lock()
	defer registry.Unlock()
	registry.sources = append(registry.sources, source{name, text})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if leaks, scanned := scanForTokens(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: a handle token leaked (contract §6.1, §8, §9: no token in any trace or log line):\n%s\n",
			strings.Join(leaks, "\n"))
		code = 1
	} else if code == 0 {
		fmt.Fprintf(os.Stderr, "token leak scan: %d trace files and stderr streams, no token\n", scanned)
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
		for _, line := range strings.Split(s.text, "\n") {
			if m := tokenPattern.FindString(line); m != "" {
				leaks = append(leaks, fmt.Sprintf("%s: %q in %s", s.name, m, line))
			}
		}
	}
	return leaks, scanned
}

// snapshot remembers p's trace files and stderr; it runs once p has stopped.
func snapshot(p *harness.Process) {
	traces, _ := filepath.Glob(filepath.Join(p.Ready.Workdir, ".murmur", "*", "trace.jsonl"))
	if !slices.Contains(traces, p.Ready.Trace) {
		traces = append(traces, p.Ready.Trace)
	}
	for _, path := range traces {
		raw, err := os.ReadFile(path)
		if err != nil {
			remember("trace "+path, "cannot read the trace: "+err.Error())
			continue
		}
		remember("trace "+path, string(raw))
	}
	remember("stderr of session "+p.Ready.SessionID, p.Stderr())
}

// start launches a capsule and registers it for the leak scan. The test's temp dir is created
// first, so that its removal is registered before the snapshot and the snapshot before the
// process's stop: cleanups then run stop, snapshot, removal.
func start(t *testing.T, c harness.Capsule) *harness.Process {
	t.Helper()
	_ = t.TempDir()
	var p *harness.Process
	t.Cleanup(func() {
		if p != nil {
			p.Stop(t)
			snapshot(p)
		}
	})
	p = harness.Start(t, c)
	return p
}

// cli runs the binary and registers its stderr for the leak scan.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	code, stdout, stderr := harness.RunCLI(t, nil, args...)
	remember("CLI stderr of "+strings.Join(args[:min(2, len(args))], " "), stderr)
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

// answer is one control API answer, kept raw so key order can be checked.
type answer struct {
	Status int
	Raw    []byte
	Body   map[string]json.RawMessage
}

// Data returns the tool result object of a 200 answer.
func (a answer) Data(t *testing.T) []byte {
	t.Helper()
	if a.Status != http.StatusOK {
		t.Fatalf("tool answered %d %s, want 200", a.Status, a.Raw)
	}
	return a.Body["data"]
}

// Code returns the error code of a refusal.
func (a answer) Code() string {
	var s string
	_ = json.Unmarshal(a.Body["error"], &s)
	return s
}

// Message returns the message of a refusal.
func (a answer) Message() string {
	var s string
	_ = json.Unmarshal(a.Body["message"], &s)
	return s
}

// control sends one request to the control API at sock. body is sent verbatim when it is a
// string, else marshalled.
func control(t *testing.T, sock, method, route string, body any) answer {
	t.Helper()
	a, err := controlE(sock, method, route, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// controlE is control without a *testing.T, for use off the test goroutine.
func controlE(sock, method, route string, body any) (answer, error) {
	var payload []byte
	switch b := body.(type) {
	case nil:
	case string:
		payload = []byte(b)
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return answer{}, err
		}
	}
	client := harness.ControlClient(sock)
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://control"+route, bytes.NewReader(payload))
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("control %s %s: %v", method, route, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return answer{}, err
	}
	a := answer{Status: resp.StatusCode, Raw: buf.Bytes()}
	if err := json.Unmarshal(a.Raw, &a.Body); err != nil {
		return a, fmt.Errorf("control %s %s answered %d with a body that is not a JSON object: %q", method, route, a.Status, a.Raw)
	}
	return a, nil
}

// share calls share-file on p's control API.
func share(t *testing.T, p *harness.Process, input map[string]any) answer {
	t.Helper()
	return control(t, p.Ready.Control, http.MethodPost, "/v1/tools/share-file", input)
}

// fetch calls fetch-peer-file on p's control API.
func fetch(t *testing.T, p *harness.Process, peer, token string) answer {
	t.Helper()
	return control(t, p.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]any{"peer": peer, "handle": token})
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

// refusalOf requires a 422 refusal whose body is exactly {"error","message"} with code.
func refusalOf(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d (%s), want %d %s", a.Status, a.Raw, status, code)
	}
	requireKeys(t, "refusal", a.Raw, "error", "message")
	if a.Code() != code {
		t.Fatalf("error %q (%s), want %q", a.Code(), a.Raw, code)
	}
	if strings.TrimSpace(a.Message()) == "" {
		t.Fatalf("refusal without a message: %s", a.Raw)
	}
}

// ---------------------------------------------------------------------------------------------
// JSON key order

// objectKeys returns the keys of the JSON object raw, in document order.
func objectKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %q", raw)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// requireKeys requires raw to be a JSON object with exactly these keys in this order.
func requireKeys(t *testing.T, what string, raw []byte, want ...string) {
	t.Helper()
	got, err := objectKeys(raw)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s keys %q, want exactly %q in that order: %s", what, got, want, raw)
	}
}

// ---------------------------------------------------------------------------------------------
// Trace

// event is one trace line: its keys in order, its values and its text.
type event struct {
	Keys []string
	M    map[string]any
	Raw  string
}

// Str returns the string field key, failing when it is not a string.
func (e event) Str(t *testing.T, key string) string {
	t.Helper()
	s, ok := e.M[key].(string)
	if !ok {
		t.Fatalf("trace field %s = %#v, want a string: %s", key, e.M[key], e.Raw)
	}
	return s
}

// traceEvents reads every line of the trace at path.
func traceEvents(t *testing.T, path string) []event {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		keys, err := objectKeys([]byte(line))
		if err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		out = append(out, event{Keys: keys, M: m, Raw: line})
	}
	return out
}

// eventsFor returns p's trace events of type typ whose field key equals value ("" matches all).
func eventsFor(t *testing.T, p *harness.Process, typ, key, value string) []event {
	t.Helper()
	var out []event
	for _, e := range traceEvents(t, p.Ready.Trace) {
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
func eventFor(t *testing.T, p *harness.Process, typ, key, value string) event {
	t.Helper()
	events := eventsFor(t, p, typ, key, value)
	if len(events) != 1 {
		t.Fatalf("%d %s events with %s=%q in the trace, want exactly 1:\n%s", len(events), typ, key, value, rawLines(events))
	}
	return events[0]
}

// lastEventFor returns the last event of type typ whose field key equals value.
func lastEventFor(t *testing.T, p *harness.Process, typ, key, value string) event {
	t.Helper()
	events := eventsFor(t, p, typ, key, value)
	if len(events) == 0 {
		t.Fatalf("no %s event with %s=%q in the trace", typ, key, value)
	}
	return events[len(events)-1]
}

func rawLines(events []event) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Raw + "\n")
	}
	return b.String()
}

// The field lists of contract §8, after the envelope.
var (
	envelopeKeys = []string{"event_type", "event_id", "parent_id", "session_id", "timestamp"}
	mintKeys     = []string{"handle_id", "path", "audience", "expires_at_ms", "outcome", "reason"}
	redeemKeys   = []string{"handle_id", "path", "generation", "audience_asserted", "bytes", "sha256", "outcome", "reason"}
	fetchKeys    = []string{"peer", "handle_id", "stored_path", "bytes", "sha256", "outcome", "reason"}
)

var eventIDPattern = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

// requireShape checks e's envelope (§8: order, ids, parent = session_start) and that its fields
// are exactly fields in order, and the outcome/reason rule.
func requireShape(t *testing.T, p *harness.Process, e event, fields []string, outcome string) {
	t.Helper()
	want := append(slices.Clone(envelopeKeys), fields...)
	if !slices.Equal(e.Keys, want) {
		t.Fatalf("trace keys %q, want exactly %q: %s", e.Keys, want, e.Raw)
	}
	if !eventIDPattern.MatchString(e.Str(t, "event_id")) {
		t.Fatalf("event_id %q is not evt_<32 hex>: %s", e.M["event_id"], e.Raw)
	}
	if e.M["session_id"] != p.Ready.SessionID {
		t.Fatalf("session_id %v, want %s: %s", e.M["session_id"], p.Ready.SessionID, e.Raw)
	}
	if starts := eventsFor(t, p, "session_start", "", ""); len(starts) != 1 || e.M["parent_id"] != starts[0].M["event_id"] {
		t.Fatalf("parent_id %v is not the session_start's event_id: %s", e.M["parent_id"], e.Raw)
	}
	if _, ok := e.M["timestamp"].(json.Number); !ok {
		t.Fatalf("timestamp is not a number: %s", e.Raw)
	}
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

// requireReason requires e's reason to be exactly the message the caller received (§8).
func requireReason(t *testing.T, e event, message string) {
	t.Helper()
	if e.M["reason"] != message {
		t.Fatalf("trace reason %#v, want the refusal's message %q: %s", e.M["reason"], message, e.Raw)
	}
}

// messageOf returns a raw refusal's message.
func messageOf(t *testing.T, r harness.Response) string {
	t.Helper()
	s, _ := r.JSON(t)["message"].(string)
	return s
}

// requireNull requires each named field of e to be JSON null.
func requireNull(t *testing.T, e event, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, present := e.M[k]; !present || v != nil {
			t.Fatalf("trace field %s = %#v, want null: %s", k, v, e.Raw)
		}
	}
}

// requireField requires e's field key to equal want (strings compared as strings, numbers as
// their decimal text).
func requireField(t *testing.T, e event, key string, want any) {
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

// handleID is the first 16 hex characters of sha256(token) (contract §6.1).
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

// forge builds a token by hand around payload JSON and a random 32-byte tag. No peer key is
// involved, so it redeems only at a fake peer that checks nothing.
func forge(payload string) string {
	tag := make([]byte, 32)
	_, _ = rand.Read(tag)
	return "mh1." + b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(tag)
}

// forgeFor builds a hand-made token whose payload names p (JSON-encoded), with a fresh nonce.
func forgeFor(p string) string {
	pj, _ := json.Marshal(p)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return forge(fmt.Sprintf(`{"v":1,"iss":"ses_fake","p":%s,"exp":%d,"n":"%x"}`, pj, time.Now().Add(time.Hour).UnixMilli(), nonce))
}

// sha256Hex is the lowercase hex sha256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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

// requireRefusal requires r to be a JSON refusal {"error","message"} with status and code,
// content-length and connection: close, never x-murmur-export-root; with wantHandleID "" it
// requires no plane header at all (the answers before the declaration check), else
// x-murmur-generation and x-murmur-handle-id = wantHandleID.
func requireRefusal(t *testing.T, r harness.Response, status int, code string, wantHandleID string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d %q, want %d %s", r.Status, r.Body, status, code)
	}
	requireKeys(t, "refusal body", r.Body, "error", "message")
	if got := r.JSON(t)["error"]; got != code {
		t.Fatalf("error %v (%s), want %s", got, r.Body, code)
	}
	if ct := r.Get("content-type"); ct != "application/json" {
		t.Fatalf("content-type %q on a refusal, want application/json", ct)
	}
	if r.Get("connection") != "close" || r.Get("content-length") == "" {
		t.Fatalf("a /resources/ response needs content-length and connection: close; headers %v", r.Header)
	}
	if r.Has("x-murmur-export-root") {
		t.Fatalf("a peer-plane answer carries x-murmur-export-root: %v", r.Header)
	}
	if wantHandleID == "" {
		if r.Has("x-murmur-generation") || r.Has("x-murmur-handle-id") {
			t.Fatalf("an answer before the declaration check carries plane headers: %v", r.Header)
		}
		return
	}
	if r.Get("x-murmur-generation") == "" {
		t.Fatalf("refusal %s lacks x-murmur-generation: %v", code, r.Header)
	}
	if got := r.Get("x-murmur-handle-id"); got != wantHandleID {
		t.Fatalf("x-murmur-handle-id %q, want %q", got, wantHandleID)
	}
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
		w.Header().Set("etag", `"sha256:`+sha256Hex(body)+`"`)
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
