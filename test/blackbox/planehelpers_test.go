package blackbox_test

// Helpers shared by the operator-plane, launch, control and robustness tests. Every name starts
// with "bb" so that tests written concurrently in this package cannot collide with them.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

// bbFilesManifest is a manifest that declares exports.files with root and, when maxBytes is not
// "", that max_bytes.
func bbFilesManifest(root, maxBytes string) string {
	m := "name: reporter\nexports:\n  files:\n    root: " + root + "\n    mode: read-only\n"
	if maxBytes != "" {
		m += "    max_bytes: " + maxBytes + "\n"
	}
	return m
}

// bbSHA is the lowercase hex sha256 of b.
func bbSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// bbETag is the etag docs/http-api.md requires for body.
func bbETag(body []byte) string { return `"sha256:` + bbSHA(body) + `"` }

// bbDo sends one raw request and reads the response within deadline.
func bbDo(t testing.TB, addr, method, target string, deadline time.Duration, headers ...string) harness.Response {
	t.Helper()
	return harness.RawWithin(t, addr, harness.RequestText(addr, method, target, headers...), deadline)
}

// bbGet is a GET with a 10 s deadline.
func bbGet(t testing.TB, addr, target string) harness.Response {
	t.Helper()
	return bbDo(t, addr, "GET", target, 10*time.Second)
}

// bbKeys returns the top-level keys of the JSON object raw, in order.
func bbKeys(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q is not a JSON object (%v)", raw, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
	}
	return keys
}

// bbObj decodes raw as one JSON object, numbers as json.Number.
func bbObj(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%q is not a JSON object: %v", raw, err)
	}
	if dec.More() {
		t.Fatalf("%q has trailing data", raw)
	}
	return m
}

// bbWantKeys fails unless the JSON object raw has exactly want as its keys, in that order.
func bbWantKeys(t testing.TB, what string, raw []byte, want ...string) {
	t.Helper()
	if got := bbKeys(t, raw); !slices.Equal(got, want) {
		t.Errorf("%s keys = %v, want exactly %v\n%s", what, got, want, raw)
	}
}

// bbEncode renders v as compact JSON without HTML escaping, the way docs/http-api.md says every
// response body is written.
func bbEncode(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

// bbErrorBody is the only shape a refusal body may have.
type bbErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// bbRefusal asserts the parts every refusal under /resources/ shares: status, content-type,
// content-length, connection: close, allow (exactly on 405) and a body that is exactly
// {"error":"<code>","message":"<text>"}. It returns the message.
func bbRefusal(t testing.TB, r harness.Response, status int, code string) string {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; response:\n%s", r.Status, status, r.Raw)
	}
	if got := r.Get("content-type"); got != "application/json" {
		t.Errorf("content-type %q, want application/json", got)
	}
	if !r.Has("content-length") {
		t.Errorf("no content-length")
	}
	if got := r.Get("connection"); got != "close" {
		t.Errorf("connection %q, want close", got)
	}
	if status == 405 {
		if got := r.Header["allow"]; !slices.Equal(got, []string{"GET"}) {
			t.Errorf("allow %q, want exactly GET", got)
		}
	} else if r.Has("allow") {
		t.Errorf("allow header on a %d", status)
	}
	if r.Head {
		return "" // a HEAD response has no body to look at
	}
	var body bbErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("body %q is not {\"error\",\"message\"}: %v", r.Body, err)
	}
	if want := bbEncode(body); string(r.Body) != want {
		t.Errorf("body %q, want exactly %q (keys error, message; compact; not HTML-escaped)", r.Body, want)
	}
	if body.Error != code {
		t.Errorf("error %q, want %q (body %s)", body.Error, code, r.Body)
	}
	if strings.TrimSpace(body.Message) == "" {
		t.Errorf("empty message in %s", r.Body)
	}
	if strings.Contains(body.Message, "/tmp") || strings.Contains(body.Message, os.TempDir()) {
		t.Errorf("message names a host path: %q", body.Message)
	}
	return body.Message
}

// bbFilesRefusal asserts a refusal on a files route: the shared refusal shape plus
// x-murmur-generation = gen and neither x-murmur-containment nor x-murmur-export-root (nor any
// validator header).
func bbFilesRefusal(t testing.TB, r harness.Response, status int, code string, gen int) string {
	t.Helper()
	msg := bbRefusal(t, r, status, code)
	if got := r.Header["x-murmur-generation"]; !slices.Equal(got, []string{strconv.Itoa(gen)}) {
		t.Errorf("x-murmur-generation %q, want [%d]", got, gen)
	}
	for _, h := range []string{"x-murmur-containment", "x-murmur-export-root", "etag", "x-murmur-mtime-ms", "x-murmur-handle-id"} {
		if r.Has(h) {
			t.Errorf("refusal carries %s: %q", h, r.Get(h))
		}
	}
	return msg
}

// bbNoPlaneHeaders fails when r carries any x-murmur-* header.
func bbNoPlaneHeaders(t testing.TB, r harness.Response) {
	t.Helper()
	for name := range r.Header {
		if strings.HasPrefix(name, "x-murmur-") {
			t.Errorf("unexpected plane header %s: %q", name, r.Header[name])
		}
	}
}

// bbServed asserts a 200 read on the operator plane serving want, with every header
// docs/http-api.md lists.
func bbServed(t testing.TB, r harness.Response, want []byte, gen int, class, root string) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d, want 200; response:\n%s", r.Status, r.Raw)
	}
	if !bytes.Equal(r.Body, want) {
		t.Fatalf("body %q, want %q", r.Body, want)
	}
	wantHeaders := map[string]string{
		"content-type":         "application/octet-stream",
		"content-length":       strconv.Itoa(len(want)),
		"etag":                 bbETag(want),
		"x-murmur-generation":  strconv.Itoa(gen),
		"x-murmur-containment": class,
		"x-murmur-export-root": root,
		"connection":           "close",
	}
	for name, value := range wantHeaders {
		if got := r.Header[name]; !slices.Equal(got, []string{value}) {
			t.Errorf("%s = %q, want exactly [%q]", name, got, value)
		}
	}
	if mt := r.Get("x-murmur-mtime-ms"); !regexp.MustCompile(`^[0-9]+$`).MatchString(mt) {
		t.Errorf("x-murmur-mtime-ms %q is not Unix milliseconds", mt)
	}
	if r.Has("x-murmur-handle-id") {
		t.Errorf("operator read carries x-murmur-handle-id")
	}
}

// bbTraceLines returns the raw lines of the trace file at path (missing file: none).
func bbTraceLines(t testing.TB, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("trace does not end with a newline: a line was written in pieces:\n%s", raw)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// bbTraceFrom waits (up to 5 s) until the trace at path has at least from+n lines and returns
// the lines from index from on.
func bbTraceFrom(t testing.TB, path string, from, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := bbTraceLines(t, path)
		if len(lines) >= from+n {
			return lines[from:]
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace has %d lines, want at least %d; tail:\n%s", len(lines), from+n, strings.Join(lines[max(0, len(lines)-5):], "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bbSession is what every resource event of one session must carry.
type bbSession struct {
	addr, trace string
	sessionID   string
	parentID    string // the event every resource event is parented on
	class       string
}

// bbSessionOf reads the session_start line of a process started without --trace-parent.
func bbSessionOf(t testing.TB, ready harness.Ready) bbSession {
	t.Helper()
	lines := bbTraceFrom(t, ready.Trace, 0, 1)
	start := bbObj(t, []byte(lines[0]))
	if start["event_type"] != "session_start" {
		t.Fatalf("first trace line is not session_start: %s", lines[0])
	}
	return bbSession{addr: ready.Listen, trace: ready.Trace, sessionID: ready.SessionID,
		parentID: start["event_id"].(string), class: ready.Containment}
}

var (
	bbEventIDRe   = regexp.MustCompile(`^evt_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	bbSessionIDRe = regexp.MustCompile(`^ses_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
)

// bbEnvelope checks the envelope of one resource event of s and returns the decoded line.
func bbEnvelope(t testing.TB, s bbSession, line, eventType string, fields ...string) map[string]any {
	t.Helper()
	bbWantKeys(t, eventType+" event", []byte(line), append([]string{"event_type", "event_id", "parent_id", "session_id", "timestamp"}, fields...)...)
	ev := bbObj(t, []byte(line))
	if ev["event_type"] != eventType {
		t.Fatalf("event_type %v, want %s: %s", ev["event_type"], eventType, line)
	}
	if id, _ := ev["event_id"].(string); !bbEventIDRe.MatchString(id) {
		t.Errorf("event_id %q is not evt_<uuidv7 hex>", ev["event_id"])
	}
	if ev["parent_id"] != s.parentID {
		t.Errorf("parent_id %v, want %s", ev["parent_id"], s.parentID)
	}
	if ev["session_id"] != s.sessionID {
		t.Errorf("session_id %v, want %s", ev["session_id"], s.sessionID)
	}
	ts, err := ev["timestamp"].(json.Number).Int64()
	if err != nil || ts < time.Now().Add(-time.Hour).UnixMilli() || ts > time.Now().Add(time.Minute).UnixMilli() {
		t.Errorf("timestamp %v is not a current Unix millisecond integer", ev["timestamp"])
	}
	return ev
}

// bbReadEvent is the resource_read a request should have produced; bytes < 0 means null.
type bbReadEvent struct {
	path      string
	bbOutcome string
	body      []byte // served bytes on ok
	gen       int
	reason    string // "" means null
}

func bbCheckRead(t testing.TB, s bbSession, line string, want bbReadEvent) {
	t.Helper()
	ev := bbEnvelope(t, s, line, "resource_read", "path", "outcome", "bytes", "sha256", "generation", "containment_achieved", "reason")
	if ev["path"] != want.path {
		t.Errorf("trace path %q, want %q", ev["path"], want.path)
	}
	if ev["outcome"] != want.bbOutcome {
		t.Errorf("trace outcome %v, want %s", ev["outcome"], want.bbOutcome)
	}
	if want.bbOutcome == "ok" {
		if ev["bytes"] != json.Number(strconv.Itoa(len(want.body))) || ev["sha256"] != bbSHA(want.body) {
			t.Errorf("trace bytes/sha256 %v/%v, want %d/%s", ev["bytes"], ev["sha256"], len(want.body), bbSHA(want.body))
		}
		if ev["reason"] != nil {
			t.Errorf("reason %v on ok, want null", ev["reason"])
		}
	} else {
		if ev["bytes"] != nil || ev["sha256"] != nil {
			t.Errorf("bytes/sha256 %v/%v on a refusal, want null/null", ev["bytes"], ev["sha256"])
		}
		if ev["reason"] != want.reason {
			t.Errorf("reason %q, want the refusal's message %q", ev["reason"], want.reason)
		}
	}
	if ev["generation"] != json.Number(strconv.Itoa(want.gen)) {
		t.Errorf("trace generation %v, want %d", ev["generation"], want.gen)
	}
	if ev["containment_achieved"] != s.class {
		t.Errorf("containment_achieved %v, want %s", ev["containment_achieved"], s.class)
	}
}

// bbListEvent is the resource_list a request should have produced.
type bbListEvent struct {
	root       string
	entries    int
	totalBytes int
	gen        int
	bbOutcome  string
	reason     string
}

func bbCheckList(t testing.TB, s bbSession, line string, want bbListEvent) {
	t.Helper()
	ev := bbEnvelope(t, s, line, "resource_list", "root", "entry_count", "total_bytes", "generation", "containment_achieved", "outcome", "reason")
	root := want.root
	if want.bbOutcome != "ok" {
		root = ""
	}
	if ev["root"] != root {
		t.Errorf("trace root %q, want %q", ev["root"], root)
	}
	n, tb := want.entries, want.totalBytes
	if want.bbOutcome != "ok" {
		n, tb = 0, 0
	}
	if ev["entry_count"] != json.Number(strconv.Itoa(n)) || ev["total_bytes"] != json.Number(strconv.Itoa(tb)) {
		t.Errorf("entry_count/total_bytes %v/%v, want %d/%d", ev["entry_count"], ev["total_bytes"], n, tb)
	}
	if ev["generation"] != json.Number(strconv.Itoa(want.gen)) {
		t.Errorf("trace generation %v, want %d", ev["generation"], want.gen)
	}
	if ev["containment_achieved"] != s.class {
		t.Errorf("containment_achieved %v, want %s", ev["containment_achieved"], s.class)
	}
	if ev["outcome"] != want.bbOutcome {
		t.Errorf("outcome %v, want %s", ev["outcome"], want.bbOutcome)
	}
	if want.bbOutcome == "ok" && ev["reason"] != nil || want.bbOutcome != "ok" && ev["reason"] != want.reason {
		t.Errorf("reason %v, want %q (null on ok)", ev["reason"], want.reason)
	}
}

// bbUntraced runs request, then a traced sentinel read, and fails unless the sentinel's event
// is the only line written meanwhile: the request itself left no trace.
func bbUntraced(t testing.TB, s bbSession, request func()) {
	t.Helper()
	mark := len(bbTraceLines(t, s.trace))
	request()
	bbGet(t, s.addr, "/resources/files/untraced-sentinel")
	lines := bbTraceFrom(t, s.trace, mark, 1)
	if len(lines) != 1 || !strings.Contains(lines[0], `"path":"untraced-sentinel"`) {
		t.Errorf("a request that must not be traced wrote:\n%s", strings.Join(lines, "\n"))
	}
}

// bbListing is a decoded listing body.
type bbListing struct {
	Root        string    `json:"root"`
	Mode        string    `json:"mode"`
	MaxBytes    int64     `json:"max_bytes"`
	Generation  int       `json:"generation"`
	Containment string    `json:"containment_achieved"`
	Entries     []bbEntry `json:"entries"`
}

type bbEntry struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MTimeMs   int64  `json:"mtime_ms"`
	SHA256    string `json:"sha256"`
}

// bbDecodeListing checks a 200 listing's headers and key order and decodes it.
func bbDecodeListing(t testing.TB, r harness.Response, gen int, class, root string) bbListing {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("listing status %d, want 200:\n%s", r.Status, r.Raw)
	}
	for name, value := range map[string]string{
		"content-type":         "application/json",
		"x-murmur-generation":  strconv.Itoa(gen),
		"x-murmur-containment": class,
		"x-murmur-export-root": root,
		"connection":           "close",
		"content-length":       strconv.Itoa(len(r.Body)),
	} {
		if got := r.Header[name]; !slices.Equal(got, []string{value}) {
			t.Errorf("listing %s = %q, want exactly [%q]", name, got, value)
		}
	}
	for _, h := range []string{"etag", "x-murmur-mtime-ms", "x-murmur-handle-id"} {
		if r.Has(h) {
			t.Errorf("listing carries %s", h)
		}
	}
	bbWantKeys(t, "listing", r.Body, "root", "mode", "max_bytes", "generation", "containment_achieved", "entries")
	var l bbListing
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		t.Fatalf("listing %s: %v", r.Body, err)
	}
	if l.Entries == nil {
		t.Errorf("entries is null, want a list: %s", r.Body)
	}
	var raw struct {
		Entries []json.RawMessage `json:"entries"`
	}
	_ = json.Unmarshal(r.Body, &raw)
	for _, e := range raw.Entries {
		bbWantKeys(t, "listing entry", e, "path", "size_bytes", "mtime_ms", "sha256")
	}
	if bbEncode(l) != string(r.Body) {
		t.Errorf("listing body is not compact, unescaped JSON:\n got %s\nwant %s", r.Body, bbEncode(l))
	}
	if l.Root != root || l.Mode != "read-only" || l.Generation != gen || l.Containment != class {
		t.Errorf("listing head root=%q mode=%q generation=%d containment=%q, want %q read-only %d %q",
			l.Root, l.Mode, l.Generation, l.Containment, root, gen, class)
	}
	return l
}

// bbPaths returns the entries' paths in order.
func bbPaths(l bbListing) []string {
	var p []string
	for _, e := range l.Entries {
		p = append(p, e.Path)
	}
	return p
}

// bbTree lists every path under dir (relative, sorted), to show what a command created.
func bbTree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(dir + "/" + rel)
		if err != nil {
			return
		}
		for _, e := range entries {
			p := strings.TrimPrefix(rel+"/"+e.Name(), "/")
			out = append(out, p)
			if e.IsDir() {
				walk(p)
			}
		}
	}
	walk("")
	slices.Sort(out)
	return out
}

// bbInt is n as the json.Number a UseNumber decoder yields.
func bbInt(n int) json.Number { return json.Number(strconv.Itoa(n)) }

// bbFetch is a goroutine-safe raw GET: it reports failures as an error instead of failing the
// test. Header names are canonicalised by net/http.
func bbFetch(addr, target string, deadline time.Duration) (int, http.Header, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(deadline))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr); err != nil {
		return 0, nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return 0, nil, nil, fmt.Errorf("content-length %d but %d bytes", resp.ContentLength, len(body))
	}
	return resp.StatusCode, resp.Header, body, nil
}
