package operatorhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/operatorhttp"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
)

// rawServer is a TCP server that answers every request with whatever respond writes, raw,
// and records each request target exactly as it arrived.
type rawServer struct {
	ln      net.Listener
	mu      sync.Mutex
	targets []string
}

func serveRaw(t *testing.T, respond func(target string, w io.Writer)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for {
					h, err := r.ReadString('\n')
					if err != nil || h == "\r\n" {
						break
					}
				}
				fields := strings.Fields(line)
				if len(fields) < 2 {
					return
				}
				s.mu.Lock()
				s.targets = append(s.targets, fields[1])
				s.mu.Unlock()
				respond(fields[1], conn)
			}()
		}
	}()
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.targets)
}

func answer(w io.Writer, status int, headers string, body string) {
	fmt.Fprintf(w, "HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s", status, len(body), headers, body)
}

func newClient(t *testing.T, base string, o operatorhttp.Options) *operatorhttp.Client {
	t.Helper()
	c, err := operatorhttp.New(base, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustRel(t *testing.T, p string) pathpolicy.RelPath {
	t.Helper()
	rel, err := pathpolicy.Lower(p)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func TestEachComponentIsEncodedSoTheServiceDecodesExactlyThePath(t *testing.T) {
	s := serveRaw(t, func(_ string, w io.Writer) { answer(w, 404, "", "") })
	c := newClient(t, s.url(), operatorhttp.Options{})
	cases := []struct {
		rule   string
		path   string
		target string
	}{
		{"a plain path is sent as it is", "notes/todo.txt", "/resources/files/notes/todo.txt"},
		{"a percent sign is escaped, so it is not decoded again", "a%41.txt", "/resources/files/a%2541.txt"},
		{"an encoded-looking dot-dot stays literal", "%2e%2e", "/resources/files/%252e%252e"},
		{"a question mark is escaped, so it starts no query", "what?.txt", "/resources/files/what%3F.txt"},
		{"a hash is escaped, so it starts no fragment", "c#.txt", "/resources/files/c%23.txt"},
		{"a space is escaped", "my file.txt", "/resources/files/my%20file.txt"},
		{"a backslash is an ordinary character, escaped", `a\..\b`, "/resources/files/a%5C..%5Cb"},
		{"three dots are an ordinary name", ".../x", "/resources/files/.../x"},
		{"non-ASCII is sent as escaped UTF-8", "café.txt", "/resources/files/caf%C3%A9.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			rel := mustRel(t, tc.path)
			if _, body, err := c.Open(context.Background(), rel); err != nil {
				t.Fatal(err)
			} else {
				body.Close()
			}
			got := s.seen()[len(s.seen())-1]
			if got != tc.target {
				t.Fatalf("target %q, want %q", got, tc.target)
			}
			back, err := pathpolicy.Parse(strings.TrimPrefix(got, "/resources/files/"))
			if err != nil || back.String() != rel.String() {
				t.Fatalf("the service would decode %q as %q (%v), not %q", got, back.String(), err, rel.String())
			}
			if want := s.url() + tc.target; c.FileURL(rel) != want {
				t.Fatalf("FileURL %q, want %q", c.FileURL(rel), want)
			}
		})
	}
}

func TestTheBaseURLMayCarryThePlaneRouteOrAPrefix(t *testing.T) {
	s := serveRaw(t, func(_ string, w io.Writer) { answer(w, 404, "", "") })
	for _, tc := range []struct{ base, listing string }{
		{s.url(), "/resources/files"},
		{s.url() + "/", "/resources/files"},
		{s.url() + "/resources/files", "/resources/files"},
		{s.url() + "/resources/files/", "/resources/files"},
		{s.url() + "/capsule/a%20b/resources/files", "/capsule/a%20b/resources/files"},
		{s.url() + "/capsule", "/capsule/resources/files"},
	} {
		c := newClient(t, tc.base, operatorhttp.Options{})
		if _, err := c.List(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := s.seen()[len(s.seen())-1]; got != tc.listing {
			t.Errorf("base %q lists at %q, want %q", tc.base, got, tc.listing)
		}
	}
}

func TestABaseURLTheClientCannotUseIsRefused(t *testing.T) {
	for rule, base := range map[string]string{
		"another scheme":         "ftp://127.0.0.1:1",
		"no scheme":              "127.0.0.1:8080",
		"no host":                "http:///resources/files",
		"user information":       "http://user:pw@127.0.0.1:1",
		"a query":                "http://127.0.0.1:1/?x=1",
		"a fragment":             "http://127.0.0.1:1/#x",
		"an empty first segment": "http://127.0.0.1:1//evil/resources/files",
	} {
		if _, err := operatorhttp.New(base, operatorhttp.Options{}); err == nil {
			t.Errorf("%s (%q) was accepted", rule, base)
		}
	}
}

func TestListDecodesTheListingAndReportsRefusals(t *testing.T) {
	listing := `{"root":"out/","mode":"read-only","max_bytes":1024,"generation":3,"containment_achieved":"sealed",` +
		`"entries":[{"path":"a.txt","size_bytes":2,"mtime_ms":5,"sha256":"ab"}]}`
	cases := []struct {
		rule   string
		status int
		body   string
		check  func(t *testing.T, err error, status int, code, message string, entries int)
	}{
		{"a listing is decoded", 200, listing, func(t *testing.T, err error, status int, _, _ string, entries int) {
			if err != nil || status != 200 || entries != 1 {
				t.Fatalf("err %v status %d entries %d", err, status, entries)
			}
		}},
		{"a refusal is an answer, not an error", 404, `{"error":"no_resource_plane","message":"none"}`,
			func(t *testing.T, err error, status int, code, message string, _ int) {
				if err != nil || status != 404 || code != "no_resource_plane" || message != "none" {
					t.Fatalf("err %v status %d code %q message %q", err, status, code, message)
				}
			}},
		{"a refusal body that is not JSON leaves the code empty", 500, "oops", func(t *testing.T, err error, status int, code, _ string, _ int) {
			if err != nil || status != 500 || code != "" {
				t.Fatalf("err %v status %d code %q", err, status, code)
			}
		}},
		{"a 200 that is not JSON is invalid_listing", 200, "<html>", requireCode(refusal.InvalidListing)},
		{"a 200 without entries is invalid_listing", 200, `{"root":"out/"}`, requireCode(refusal.InvalidListing)},
		{"an entry of the wrong type is invalid_listing", 200, `{"entries":[{"path":1}]}`, requireCode(refusal.InvalidListing)},
		{"trailing text after the listing is invalid_listing", 200, `{"entries":[]} x`, requireCode(refusal.InvalidListing)},
		{"a listing over the bound is invalid_listing", 200, `{"entries":[` + strings.Repeat(`{"path":"x"},`, 100) + `{}]}`, requireCode(refusal.InvalidListing)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := serveRaw(t, func(_ string, w io.Writer) { answer(w, tc.status, "", tc.body) })
			c := newClient(t, s.url(), operatorhttp.Options{MaxListingBytes: 1000})
			l, err := c.List(context.Background())
			tc.check(t, err, l.Status, l.ErrorCode, l.ErrorMessage, len(l.Entries))
		})
	}
}

func requireCode(code refusal.Code) func(t *testing.T, err error, _ int, _, _ string, _ int) {
	return func(t *testing.T, err error, _ int, _, _ string, _ int) {
		t.Helper()
		if !refusal.Is(err, code) {
			t.Fatalf("err %v, want %s", err, code)
		}
	}
}

func TestOpenReportsTheHeadAndNeverFollowsARedirect(t *testing.T) {
	s := serveRaw(t, func(target string, w io.Writer) {
		if target == "/resources/files/moved" {
			answer(w, 302, "Location: /resources/files/elsewhere\r\n", `{"error":"ok"}`)
			return
		}
		answer(w, 200, "etag: \"sha256:aa\"\r\netag: \"sha256:bb\"\r\nx-murmur-mtime-ms: 1234\r\n", "body")
	})
	c := newClient(t, s.url(), operatorhttp.Options{})
	head, body, err := c.Open(context.Background(), mustRel(t, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil || string(data) != "body" || head.Status != 200 || head.ContentLength != 4 || head.ETag != `"sha256:aa"` ||
		!head.HasETag || head.MtimeMs != 1234 || !head.HasMtime {
		t.Fatalf("head %+v body %q err %v", head, data, err)
	}
	head, body, err = c.Open(context.Background(), mustRel(t, "moved"))
	if err != nil || head.Status != 302 || head.ErrorCode != "ok" {
		t.Fatalf("head %+v err %v; want the 302 itself", head, err)
	}
	body.Close()
	if slices.Contains(s.seen(), "/resources/files/elsewhere") {
		t.Fatalf("the redirect was followed")
	}
}

func TestATransportFailureIsServiceUnreachableAndNeverShowsTheURL(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	s := serveRaw(t, func(target string, w io.Writer) {
		switch target {
		case "/resources/files/short":
			fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly ten b")
		case "/resources/files/stall":
			fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nfirst")
			<-stall
		case "/resources/files/silent":
			<-stall
		}
	})
	c := newClient(t, s.url(), operatorhttp.Options{IdleTimeout: 300 * time.Millisecond})
	for _, tc := range []struct{ rule, path, says string }{
		{"a body shorter than its content-length", "short", "ended before its content-length"},
		{"a body that stalls", "stall", "no progress"},
		{"a service that never answers", "silent", "no progress"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, body, err := c.Open(context.Background(), mustRel(t, tc.path))
			if err == nil {
				_, err = io.ReadAll(body)
				body.Close()
			}
			requireUnreachable(t, err, tc.says)
		})
	}
	t.Run("a refused connection", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		_, err := newClient(t, "http://"+addr, operatorhttp.Options{}).List(context.Background())
		requireUnreachable(t, err, "connection refused (nothing listens there)")
	})
}

func requireUnreachable(t *testing.T, err error, says string) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.ServiceUnreachable || !strings.Contains(r.Message, says) {
		t.Fatalf("err %v; want service_unreachable saying %q", err, says)
	}
	if strings.Contains(r.Message, "127.0.0.1") || strings.Contains(r.Message, "/resources/") {
		t.Fatalf("the message shows the URL: %q", r.Message)
	}
	if errors.Unwrap(r) == nil {
		t.Fatalf("the cause is not kept for the log")
	}
}
