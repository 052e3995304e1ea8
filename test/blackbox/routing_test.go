package blackbox_test

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbRoutingCapsule is the layout the routing tables run against: a few files under out/, names
// that only a literal reading of a bad escape reaches, and a secret beside the root.
var bbRoutingCapsule = harness.Capsule{
	Manifest: bbFilesManifest("out/", ""),
	Files: fixture.Layout{
		"out/report.md":     "# report\n",
		"out/dir/report.md": "nested\n",
		"out/100%":          "hundred",
		"out/%zz":           "literal-zz",
		`out/a\b`:           "backslash",
		"out/sub/x.txt":     "x",
		"secret":            "SECRET",
	},
}

// TestRawTargetIsLoweredByTheContractNeverByGo pins docs/http-api.md, "Routing" and
// "Lowering a path": the read path is the
// raw target after /resources/files/, percent-decoded once (a bad escape kept literally, %2F a
// separator, no second pass), refused outside_root when empty/absolute/NUL/invalid UTF-8 or when
// a component is "", "." or "..", with one trailing slash dropped, a backslash ordinary and the
// query ignored. Every answer is ours (never Go's plain-text 400) and is traced with the decoded
// path, trailing slash kept.
func TestRawTargetIsLoweredByTheContractNeverByGo(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	s := bbSessionOf(t, p.Ready)
	messages := map[string]string{}

	tests := []struct {
		name, raw string
		status    int
		code      string // "" on 200
		body      string // on 200
		tracePath string
	}{
		{"plain read", "report.md", 200, "", "# report\n", "report.md"},
		{"query never selects", "report.md?x=../../etc", 200, "", "# report\n", "report.md"},
		{"query with a version is ignored", "report.md?generation=0&version=1", 200, "", "# report\n", "report.md"},
		{"escape decoded once", "r%65port.md", 200, "", "# report\n", "report.md"},
		{"one trailing slash dropped", "dir/report.md/", 200, "", "nested\n", "dir/report.md/"},
		{"invalid escape kept literally", "%zz", 200, "", "literal-zz", "%zz"},
		{"lone percent kept literally", "100%", 200, "", "hundred", "100%"},
		{"percent-encoded percent decodes to a literal", "%25zz", 200, "", "literal-zz", "%zz"},
		{"encoded percent at the end", "100%25", 200, "", "hundred", "100%"},
		{"backslash is an ordinary character", `a\b`, 200, "", "backslash", `a\b`},
		{"encoded backslash is an ordinary character", "a%5Cb", 200, "", "backslash", `a\b`},
		{"encoded dot-dot", "%2e%2e/secret", 403, "outside_root", "", "../secret"},
		{"encoded dot-dot and slash, upper case", "%2E%2E%2Fsecret", 403, "outside_root", "", "../secret"},
		{"traversal built from %2F", "dir%2F..%2F..%2Fsecret", 403, "outside_root", "", "dir/../../secret"},
		{"raw dot-dot", "../secret", 403, "outside_root", "", "../secret"},
		{"no second decoding pass", "%252e%252e/secret", 404, "not_found", "", "%2e%2e/secret"},
		{"empty component", "a//b", 403, "outside_root", "", "a//b"},
		{"dot component first", "./x", 403, "outside_root", "", "./x"},
		{"dot component inside", "dir/./report.md", 403, "outside_root", "", "dir/./report.md"},
		{"dot-dot that comes back", "dir/../report.md", 403, "outside_root", "", "dir/../report.md"},
		{"two trailing slashes", "x//", 403, "outside_root", "", "x//"},
		{"trailing slash after a dot", "dir/./", 403, "outside_root", "", "dir/./"},
		{"lone dot", ".", 403, "outside_root", "", "."},
		{"lone dot-dot", "..", 403, "outside_root", "", ".."},
		{"encoded lone dot", "%2e", 403, "outside_root", "", "."},
		{"absolute path", "/etc/passwd", 403, "outside_root", "", "/etc/passwd"},
		{"absolute path built from %2F", "%2Fetc%2Fpasswd", 403, "outside_root", "", "/etc/passwd"},
		{"encoded slash alone", "%2F", 403, "outside_root", "", "/"},
		{"raw slash alone", "/", 403, "outside_root", "", "/"},
		{"NUL byte", "%00", 403, "outside_root", "", "\x00"},
		{"NUL byte inside a name", "report.md%00.txt", 403, "outside_root", "", "report.md\x00.txt"},
		{"invalid UTF-8", "%ff", 403, "outside_root", "", "\uFFFD"},
		{"invalid UTF-8 inside a name", "rep%c3ort.md", 403, "outside_root", "", "rep\uFFFDort.md"},
		{"valid UTF-8 that names nothing", "caf%C3%A9", 404, "not_found", "", "café"},
		{"backslash traversal is a name", `..%5Csecret`, 404, "not_found", "", `..\secret`},
		{"name that does not exist", "nothere.md", 404, "not_found", "", "nothere.md"},
		{"directory", "dir", 403, "not_a_regular_file", "", "dir"},
		{"directory with a trailing slash", "dir/", 403, "not_a_regular_file", "", "dir/"},
		{"a file used as a directory (ENOTDIR)", "report.md/x", 404, "not_found", "", "report.md/x"},
		{"lower-case %2f is a separator too", "dir%2freport.md", 200, "", "nested\n", "dir/report.md"},
		{"name too long is io_error", strings.Repeat("n", 256), 500, "io_error", "", strings.Repeat("n", 256)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mark := len(harness.TraceLines(t, s.trace))
			r := harness.Get(t, s.addr, "/resources/files/"+tc.raw)
			want := bbReadEvent{path: tc.tracePath, bbOutcome: "ok", body: []byte(tc.body)}
			if tc.status == 200 {
				bbServed(t, r, []byte(tc.body), 0, "advisory", "out/")
			} else {
				msg := bbFilesRefusal(t, r, tc.status, tc.code, 0)
				if prev, ok := messages[tc.code]; ok && prev != msg {
					t.Errorf("message for %s is not fixed text: %q, earlier %q", tc.code, msg, prev)
				}
				messages[tc.code] = msg
				want.bbOutcome, want.reason = tc.code, msg
			}
			lines := harness.TraceFrom(t, s.trace, mark, 1)
			if len(lines) != 1 {
				t.Fatalf("one request wrote %d trace lines:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			bbCheckRead(t, s, lines[0], want)
		})
	}
	t.Run("nothing outside the root was touched", func(t *testing.T) {
		if got, err := os.ReadFile(filepath.Join(p.Workdir, "secret")); err != nil || string(got) != "SECRET" {
			t.Errorf("secret is now %q (%v)", got, err)
		}
	})
}

// TestEveryMethodButGETIsRefused405 pins docs/http-api.md, "Routing" and "Refusals": every
// method other than the exact
// GET (HEAD, OPTIONS and lowercase get included) on any /resources/ route answers 405
// method_not_allowed with allow: GET; on a files route it carries x-murmur-generation and is
// traced, on the peer plane and on an unknown route it carries no plane header and is not
// traced. Nothing is ever written.
func TestEveryMethodButGETIsRefused405(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	s := bbSessionOf(t, p.Ready)
	before := bbTree(t, p.Workdir)
	routes := []struct {
		target string
		traced string // "", "list" or the traced read path
	}{
		{"/resources/files", "list"},
		{"/resources/files/", "list"},
		{"/resources/files/x", "x"},
		{"/resources/files/report.md", "report.md"},
		{"/resources/peer/x", ""},
		{"/resources/peer", ""},
		{"/resources/zzz", ""},
	}
	for _, route := range routes {
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "get", "MKCOL", "Get"} {
			t.Run(method+" "+route.target, func(t *testing.T) {
				send := func() harness.Response {
					if method == "POST" || method == "PUT" || method == "PATCH" {
						req := method + " " + route.target + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
						return harness.Raw(t, s.addr, req)
					}
					return harness.Request(t, s.addr, method, route.target)
				}
				if route.traced == "" {
					bbUntraced(t, s, func() {
						r := send()
						harness.RequireRefusal(t, r, 405, "method_not_allowed")
						harness.RequireNoPlaneHeaders(t, r)
					})
					return
				}
				mark := len(harness.TraceLines(t, s.trace))
				r := send()
				msg := bbFilesRefusal(t, r, 405, "method_not_allowed", 0)
				lines := harness.TraceFrom(t, s.trace, mark, 1)
				if method == "HEAD" {
					msg = harness.Object(t, []byte(lines[0]))["reason"].(string)
				}
				if route.traced == "list" {
					bbCheckList(t, s, lines[0], bbListEvent{bbOutcome: "method_not_allowed", reason: msg})
				} else {
					bbCheckRead(t, s, lines[0], bbReadEvent{path: route.traced, bbOutcome: "method_not_allowed", reason: msg})
				}
			})
		}
	}
	t.Run("nothing was written", func(t *testing.T) {
		if after := bbTree(t, p.Workdir); !slices.Equal(before, after) {
			t.Errorf("the workdir changed:\nbefore %v\nafter  %v", before, after)
		}
		if got, _ := os.ReadFile(filepath.Join(p.Workdir, "out/report.md")); string(got) != "# report\n" {
			t.Errorf("report.md is now %q", got)
		}
	})
}

// TestUnknownResourcesRouteIsNotFoundUntraced pins docs/http-api.md, "Routing": a
// /resources/... target that no
// plane owns (decided on the raw target, by whole segments) answers GET with 404 not_found in
// the operator plane's wording, no plane header, no trace; an encoded route name never reaches
// a plane.
func TestUnknownResourcesRouteIsNotFoundUntraced(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	s := bbSessionOf(t, p.Ready)
	bbNotFound := bbFilesRefusal(t, harness.Get(t, s.addr, "/resources/files/nothere"), 404, "not_found", 0)
	for _, target := range []string{
		"/resources/zzz",
		"/resources/",
		"/resources/filesx",
		"/resources/files-old/report.md",
		"/resources/%66iles/report.md",
		"/resources/files%2Freport.md",
		"/resources/peerless/x",
		"/resources/Files/report.md",
		"/resources//files/report.md",
		"/resources/zzz?x=1",
	} {
		t.Run(target, func(t *testing.T) {
			bbUntraced(t, s, func() {
				r := harness.Get(t, s.addr, target)
				if msg := harness.RequireRefusal(t, r, 404, "not_found"); msg != bbNotFound {
					t.Errorf("message %q, want the operator plane's not_found text %q", msg, bbNotFound)
				}
				harness.RequireNoPlaneHeaders(t, r)
			})
		})
	}
}

// TestPathsOutsideResourcesAreBare404 pins docs/http-api.md, "Routing": /resources without a
// slash and
// every path that is neither under /resources/ nor the agent card answer a bare 404 with an
// empty body, no JSON and no plane header, untraced.
func TestPathsOutsideResourcesAreBare404(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	s := bbSessionOf(t, p.Ready)
	for _, tc := range []struct{ method, target string }{
		{"GET", "/resources"},
		{"GET", "/resources?x=/files/report.md"},
		{"POST", "/resources"},
		{"GET", "/"},
		{"GET", "/index.html"},
		{"GET", "/RESOURCES/files/report.md"},
		{"GET", "/%72esources/files/report.md"},
		{"GET", "/resourcesfiles/report.md"},
		{"GET", "/.well-known/agent-card.jsonx"},
		{"GET", "/.well-known/agent-card.json/"},
		{"GET", "/.well-known/agent-card%2Ejson"},
		{"GET", "/.well-known/"},
		{"DELETE", "/out/report.md"},
		{"OPTIONS", "*"},
		{"GET", "http://x/resources/files/report.md"},
		{"GET", "http://x/resources/files/%2e%2e/secret"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			bbUntraced(t, s, func() {
				bbBare404(t, harness.Request(t, s.addr, tc.method, tc.target))
			})
		})
	}
}

func bbBare404(t testing.TB, r harness.Response) {
	t.Helper()
	if r.Status != 404 {
		t.Fatalf("status %d, want 404:\n%s", r.Status, r.Raw)
	}
	if len(r.Body) != 0 {
		t.Errorf("body %q, want empty", r.Body)
	}
	if ct := r.Get("content-type"); strings.Contains(ct, "json") {
		t.Errorf("content-type %q on a bare 404", ct)
	}
	harness.RequireNoPlaneHeaders(t, r)
}

// TestAgentCardIsServedOnlyToGET pins docs/http-api.md, "The agent card": the card answers GET
// (the query cut
// first) with 200 application/json carrying name, version, url, protocolVersion 0.3.0,
// session_id and serves.planes; any other method on its path is the bare 404.
func TestAgentCardIsServedOnlyToGET(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	s := bbSessionOf(t, p.Ready)
	for _, target := range []string{"/.well-known/agent-card.json", "/.well-known/agent-card.json?x=1"} {
		t.Run("GET "+target, func(t *testing.T) {
			bbUntraced(t, s, func() {
				r := harness.Get(t, s.addr, target)
				if r.Status != 200 || r.Get("content-type") != "application/json" {
					t.Fatalf("status %d content-type %q:\n%s", r.Status, r.Get("content-type"), r.Raw)
				}
				var card struct {
					Name            string `json:"name"`
					Version         string `json:"version"`
					URL             string `json:"url"`
					ProtocolVersion string `json:"protocolVersion"`
					SessionID       string `json:"session_id"`
					Skills          []any  `json:"skills"`
					Serves          struct {
						Planes []string `json:"planes"`
					} `json:"serves"`
				}
				if err := json.Unmarshal(r.Body, &card); err != nil {
					t.Fatalf("card %s: %v", r.Body, err)
				}
				if card.Name != "reporter" || card.Version != "0.0.0" || card.URL != p.Ready.URL ||
					card.ProtocolVersion != "0.3.0" || card.SessionID != p.Ready.SessionID ||
					card.Skills == nil || len(card.Skills) != 0 || !slices.Equal(card.Serves.Planes, []string{"files"}) {
					t.Errorf("card %s", r.Body)
				}
			})
		})
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "get"} {
		t.Run(method, func(t *testing.T) {
			bbUntraced(t, s, func() {
				bbBare404(t, harness.Request(t, s.addr, method, "/.well-known/agent-card.json"))
			})
		})
	}
}

// TestEveryResourcesResponseClosesTheConnection pins docs/http-api.md, "Routing": every
// response under
// /resources/ carries connection: close and content-length, whatever the client asked for
// (HTTP/1.0, keep-alive), and the server does close the connection.
func TestEveryResourcesResponseClosesTheConnection(t *testing.T) {
	p := harness.Start(t, bbRoutingCapsule)
	for _, tc := range []struct{ name, request string }{
		{"HTTP/1.1 asking for keep-alive", "GET /resources/files/report.md HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n"},
		{"HTTP/1.0 read", "GET /resources/files/report.md HTTP/1.0\r\n\r\n"},
		{"HTTP/1.0 keep-alive read", "GET /resources/files/report.md HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
		{"HTTP/1.0 listing", "GET /resources/files HTTP/1.0\r\n\r\n"},
		{"HTTP/1.0 refusal", "GET /resources/files/nothere HTTP/1.0\r\n\r\n"},
		{"HTTP/1.1 pipelined second request is not answered", "GET /resources/files/report.md HTTP/1.1\r\nHost: localhost\r\n\r\nGET /resources/files/dir/report.md HTTP/1.1\r\nHost: localhost\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := harness.RawWithin(t, p.Ready.Listen, tc.request, 5*time.Second)
			if got := r.Get("connection"); got != "close" {
				t.Errorf("connection %q, want close:\n%s", got, r.Raw)
			}
			if !r.Has("content-length") {
				t.Errorf("no content-length:\n%s", r.Raw)
			}
			if strings.Count(string(r.Raw), "HTTP/1.") != 1 {
				t.Errorf("more than one response on a closed connection:\n%s", r.Raw)
			}
		})
	}
}

// TestSlowHeaderConnectionIsClosed pins --read-header-timeout (docs/operator-guide.md,
// "Memory and connection bounds"): a connection that
// has not sent its whole request header by then is closed without an answer from a plane.
func TestSlowHeaderConnectionIsClosed(t *testing.T) {
	c := bbRoutingCapsule
	c.Args = []string{"--read-header-timeout", "1s"}
	p := harness.Start(t, c)
	s := bbSessionOf(t, p.Ready)
	bbUntraced(t, s, func() {
		conn, err := net.Dial("tcp", p.Ready.Listen)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /resources/files/report.md HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		raw, err := io.ReadAll(conn)
		if err != nil {
			t.Fatalf("the connection was not closed within 5 s: %v", err)
		}
		if d := time.Since(start); d < 500*time.Millisecond {
			t.Errorf("closed after %v, before the 1 s timeout", d)
		}
		if strings.Contains(string(raw), "# report") {
			t.Errorf("an incomplete header was answered with the file: %q", raw)
		}
	})
}
