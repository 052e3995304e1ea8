package blackbox_test

// Helpers of the operator-plane, launch, control and robustness tests; what the peer suite
// needs too lives in test/harness. Every name starts with "bb" so that tests written
// concurrently in this package cannot collide with them.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

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

// bbFilesRefusal asserts a refusal on a files route: the shared refusal shape plus
// x-murmur-generation = gen and neither x-murmur-containment nor x-murmur-export-root (nor any
// validator header).
func bbFilesRefusal(t testing.TB, r harness.Response, status int, code string, gen int) string {
	t.Helper()
	msg := harness.RequireRefusal(t, r, status, code)
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

// bbServed asserts a 200 read on the operator plane serving want, with every header
// docs/http-api.md ("Reading a file") lists.
func bbServed(t testing.TB, r harness.Response, want []byte, gen int, class, root string) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d, want 200; response:\n%s", r.Status, r.Raw)
	}
	if !bytes.Equal(r.Body, want) {
		t.Fatalf("body %q, want %q", r.Body, want)
	}
	harness.RequireHeaders(t, r, map[string]string{
		"content-type":         "application/octet-stream",
		"content-length":       strconv.Itoa(len(want)),
		"etag":                 harness.ETag(want),
		"x-murmur-generation":  strconv.Itoa(gen),
		"x-murmur-containment": class,
		"x-murmur-export-root": root,
		"connection":           "close",
	})
	if mt := r.Get("x-murmur-mtime-ms"); !regexp.MustCompile(`^[0-9]+$`).MatchString(mt) {
		t.Errorf("x-murmur-mtime-ms %q is not Unix milliseconds", mt)
	}
	if r.Has("x-murmur-handle-id") {
		t.Errorf("operator read carries x-murmur-handle-id")
	}
}

// bbSession is what every resource event of one session must carry, and where to find the
// process.
type bbSession struct {
	harness.Session
	addr, trace string
	class       string
}

// bbSessionOf reads the session_start line of a process started without --trace-parent.
func bbSessionOf(t testing.TB, ready harness.Ready) bbSession {
	t.Helper()
	return bbSession{Session: harness.SessionOf(t, ready), addr: ready.Listen, trace: ready.Trace, class: ready.Containment}
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
	ev := harness.ParseEvent(t, line)
	harness.RequireEnvelope(t, s.Session, ev, "resource_read", "path", "outcome", "bytes", "sha256", "generation", "containment_achieved", "reason")
	if ev.M["path"] != want.path {
		t.Errorf("trace path %q, want %q", ev.M["path"], want.path)
	}
	if ev.M["outcome"] != want.bbOutcome {
		t.Errorf("trace outcome %v, want %s", ev.M["outcome"], want.bbOutcome)
	}
	if want.bbOutcome == "ok" {
		if ev.M["bytes"] != json.Number(strconv.Itoa(len(want.body))) || ev.M["sha256"] != harness.SHA256Hex(want.body) {
			t.Errorf("trace bytes/sha256 %v/%v, want %d/%s", ev.M["bytes"], ev.M["sha256"], len(want.body), harness.SHA256Hex(want.body))
		}
		if ev.M["reason"] != nil {
			t.Errorf("reason %v on ok, want null", ev.M["reason"])
		}
	} else {
		if ev.M["bytes"] != nil || ev.M["sha256"] != nil {
			t.Errorf("bytes/sha256 %v/%v on a refusal, want null/null", ev.M["bytes"], ev.M["sha256"])
		}
		if ev.M["reason"] != want.reason {
			t.Errorf("reason %q, want the refusal's message %q", ev.M["reason"], want.reason)
		}
	}
	if ev.M["generation"] != json.Number(strconv.Itoa(want.gen)) {
		t.Errorf("trace generation %v, want %d", ev.M["generation"], want.gen)
	}
	if ev.M["containment_achieved"] != s.class {
		t.Errorf("containment_achieved %v, want %s", ev.M["containment_achieved"], s.class)
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
	ev := harness.ParseEvent(t, line)
	harness.RequireEnvelope(t, s.Session, ev, "resource_list", "root", "entry_count", "total_bytes", "generation", "containment_achieved", "outcome", "reason")
	root := want.root
	if want.bbOutcome != "ok" {
		root = ""
	}
	if ev.M["root"] != root {
		t.Errorf("trace root %q, want %q", ev.M["root"], root)
	}
	n, tb := want.entries, want.totalBytes
	if want.bbOutcome != "ok" {
		n, tb = 0, 0
	}
	if ev.M["entry_count"] != json.Number(strconv.Itoa(n)) || ev.M["total_bytes"] != json.Number(strconv.Itoa(tb)) {
		t.Errorf("entry_count/total_bytes %v/%v, want %d/%d", ev.M["entry_count"], ev.M["total_bytes"], n, tb)
	}
	if ev.M["generation"] != json.Number(strconv.Itoa(want.gen)) {
		t.Errorf("trace generation %v, want %d", ev.M["generation"], want.gen)
	}
	if ev.M["containment_achieved"] != s.class {
		t.Errorf("containment_achieved %v, want %s", ev.M["containment_achieved"], s.class)
	}
	if ev.M["outcome"] != want.bbOutcome {
		t.Errorf("outcome %v, want %s", ev.M["outcome"], want.bbOutcome)
	}
	if want.bbOutcome == "ok" && ev.M["reason"] != nil || want.bbOutcome != "ok" && ev.M["reason"] != want.reason {
		t.Errorf("reason %v, want %q (null on ok)", ev.M["reason"], want.reason)
	}
}

// bbUntraced runs request, then a traced sentinel read, and fails unless the sentinel's event
// is the only line written meanwhile: the request itself left no trace.
func bbUntraced(t testing.TB, s bbSession, request func()) {
	t.Helper()
	mark := len(harness.TraceLines(t, s.trace))
	request()
	harness.Get(t, s.addr, "/resources/files/untraced-sentinel")
	lines := harness.TraceFrom(t, s.trace, mark, 1)
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
	harness.RequireHeaders(t, r, map[string]string{
		"content-type":         "application/json",
		"x-murmur-generation":  strconv.Itoa(gen),
		"x-murmur-containment": class,
		"x-murmur-export-root": root,
		"connection":           "close",
		"content-length":       strconv.Itoa(len(r.Body)),
	})
	for _, h := range []string{"etag", "x-murmur-mtime-ms", "x-murmur-handle-id"} {
		if r.Has(h) {
			t.Errorf("listing carries %s", h)
		}
	}
	harness.RequireKeys(t, "listing", r.Body, "root", "mode", "max_bytes", "generation", "containment_achieved", "entries")
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
		harness.RequireKeys(t, "listing entry", e, "path", "size_bytes", "mtime_ms", "sha256")
	}
	if harness.Encode(l) != string(r.Body) {
		t.Errorf("listing body is not compact, unescaped JSON:\n got %s\nwant %s", r.Body, harness.Encode(l))
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

// bbAsRootWithout returns, when the test runs as root, the harness.Capsule.Wrapper (or command
// prefix) that runs a command without the capabilities caps (setpriv's --bounding-set syntax,
// such as "-sys_ptrace"); as any other user, nil. Root without setpriv skips the test, saying
// why the check cannot be made.
func bbAsRootWithout(t *testing.T, caps, otherwise string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv (util-linux): " + otherwise)
	}
	return []string{setpriv, "--bounding-set", caps}
}
