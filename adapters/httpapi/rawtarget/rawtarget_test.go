package rawtarget

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// seen is what the test handler reports about the request it received. The byte slices travel
// as base64, so invalid UTF-8 survives the trip.
type seen struct {
	Target     []byte `json:"target"`
	RequestURI []byte `json:"request_uri"`
	Path       []byte `json:"path"`
	Header     string `json:"header"`
	Body       string `json:"body"`
}

type testServer struct {
	addr  string
	calls atomic.Int64
}

// startServer serves a handler that echoes what it saw as JSON, behind NewListener and
// ConnContext, one request per connection unless keepAlive.
func startServer(t *testing.T, keepAlive bool) *testServer {
	t.Helper()
	ts := &testServer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ts.calls.Add(1)
			body, _ := io.ReadAll(r.Body)
			_ = json.NewEncoder(w).Encode(seen{
				Target: []byte(OriginalTarget(r)), RequestURI: []byte(r.RequestURI), Path: []byte(r.URL.Path),
				Header: r.Header.Get("X-Echo"), Body: string(body),
			})
		}),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 300 * time.Millisecond,
	}
	srv.SetKeepAlivesEnabled(keepAlive)
	go func() { _ = srv.Serve(NewListener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	ts.addr = ln.Addr().String()
	return ts
}

// exchange writes each chunk separately (with a pause between them, so they arrive as separate
// segments), half-closes the connection and returns every byte the server sent until it closed.
func (ts *testServer) exchange(t *testing.T, chunks ...string) []byte {
	t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i, chunk := range chunks {
		if i > 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := io.WriteString(c, chunk); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

// responses parses every HTTP response in raw.
func responses(t *testing.T, raw []byte) []*http.Response {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(raw))
	var out []*http.Response
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return out
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("parse response: %v\nraw: %q", err, raw)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
}

// one parses raw as exactly one response.
func one(t *testing.T, raw []byte) *http.Response {
	t.Helper()
	rs := responses(t, raw)
	if len(rs) != 1 {
		t.Fatalf("got %d responses, want 1\nraw: %q", len(rs), raw)
	}
	return rs[0]
}

// handled asserts that resp came from the test handler and returns what it saw.
func handled(t *testing.T, resp *http.Response) seen {
	t.Helper()
	var s seen
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 from the handler", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decode handler answer: %v", err)
	}
	return s
}

func get(target string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"
}

func TestRejectedEscapesReachTheHandlerAsSent(t *testing.T) {
	ts := startServer(t, false)
	tests := []struct {
		target, requestURI, path string
	}{
		{"/resources/files/%zz", "/resources/files/%25zz", "/resources/files/%zz"},
		{"/resources/files/100%", "/resources/files/100%25", "/resources/files/100%"},
		{"/%", "/%25", "/%"},
		{"/resources/files/%2", "/resources/files/%252", "/resources/files/%2"},
		{"/resources/files/%%41", "/resources/files/%25%41", "/resources/files/%A"},
		{"/resources/files/a%g1b%", "/resources/files/a%25g1b%25", "/resources/files/a%g1b%"},
		// The query is never unescaped by net/http, so it is left alone.
		{"/resources/files/%zz?q=%zz&r=%", "/resources/files/%25zz?q=%zz&r=%", "/resources/files/%zz"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			s := handled(t, one(t, ts.exchange(t, get(tt.target))))
			if string(s.Target) != tt.target {
				t.Errorf("OriginalTarget = %q, want %q", s.Target, tt.target)
			}
			if string(s.RequestURI) != tt.requestURI {
				t.Errorf("RequestURI = %q, want %q", s.RequestURI, tt.requestURI)
			}
			if string(s.Path) != tt.path {
				t.Errorf("URL.Path = %q, want %q", s.Path, tt.path)
			}
		})
	}
}

func TestTargetsNetHTTPAcceptsAreNotChanged(t *testing.T) {
	ts := startServer(t, false)
	for _, target := range []string{
		"/resources/files/%2e%2e",
		"/resources/files/%2e%2e/%2E%2e/etc",
		"/resources/files/a%2Fb%2fc%5C",
		"/resources/files/%252e",
		"/resources/files/%41%c3%a9",
		"/resources/files/caf\xc3\xa9",
		"/resources/files/\xff\xfe",
		"/resources/files/a\\b#frag",
		"//resources/files",
		"/resources/files/x?%",
	} {
		t.Run(target, func(t *testing.T) {
			s := handled(t, one(t, ts.exchange(t, get(target))))
			if string(s.Target) != target || string(s.RequestURI) != target {
				t.Errorf("OriginalTarget = %q, RequestURI = %q, want both %q", s.Target, s.RequestURI, target)
			}
		})
	}
}

func TestUnparsableRequestsKeepNetHTTPsBare400(t *testing.T) {
	ts := startServer(t, false)
	for name, request := range map[string]string{
		"NUL in target":       get("/resources/files/a\x00b"),
		"tab in target":       get("/resources/files/a\tb%zz"),
		"DEL in target":       get("/resources/files/a\x7fb"),
		"raw space in target": get("/resources/files/a b"),
		"absolute form":       get("http://x/resources/files/%zz"),
		"no target":           "GET\r\nHost: x\r\n\r\n",
		"missing Host":        "GET /resources/files/%zz HTTP/1.1\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			resp := one(t, ts.exchange(t, request))
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
		})
	}
	if n := ts.calls.Load(); n != 0 {
		t.Errorf("handler called %d times, want 0", n)
	}
}

func TestRequestLineInManySegments(t *testing.T) {
	ts := startServer(t, false)
	request := get("/resources/files/%zz/100%")
	var chunks []string
	for i := range len(request) {
		chunks = append(chunks, request[i:i+1])
	}
	s := handled(t, one(t, ts.exchange(t, chunks...)))
	if string(s.Target) != "/resources/files/%zz/100%" {
		t.Errorf("OriginalTarget = %q", s.Target)
	}
}

func TestOnlyTheRequestLineIsRewritten(t *testing.T) {
	ts := startServer(t, false)
	body := "%zz in the body, 100%"
	s := handled(t, one(t, ts.exchange(t,
		"POST /resources/files/%zz HTTP/1.1\r\nHost: x\r\nX-Echo: %zz 100%\r\n",
		"Content-Length: 21\r\n\r\n"+body)))
	if string(s.Target) != "/resources/files/%zz" || s.Header != "%zz 100%" || s.Body != body {
		t.Errorf("handler saw target %q, header %q, body %q", s.Target, s.Header, s.Body)
	}
}

// targetForLine returns a target ending in "%zz" whose GET request line (line ending included)
// is n bytes long.
func targetForLine(t *testing.T, n int) string {
	t.Helper()
	overhead := len("GET  HTTP/1.1\r\n") + len("/%zz")
	target := "/" + strings.Repeat("a", n-overhead) + "%zz"
	if got := len("GET " + target + " HTTP/1.1\r\n"); got != n {
		t.Fatalf("test line is %d bytes, want %d", got, n)
	}
	return target
}

func TestLongTargets(t *testing.T) {
	ts := startServer(t, false)
	t.Run("line of MaxRequestLine bytes is repaired", func(t *testing.T) {
		target := targetForLine(t, MaxRequestLine)
		if s := handled(t, one(t, ts.exchange(t, get(target)))); string(s.Target) != target {
			t.Errorf("OriginalTarget has %d bytes, want %d", len(s.Target), len(target))
		}
	})
	t.Run("longer line passes through untouched", func(t *testing.T) {
		resp := one(t, ts.exchange(t, get(targetForLine(t, MaxRequestLine+1))))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want net/http's 400", resp.StatusCode)
		}
	})
	t.Run("longer valid target falls back to RequestURI", func(t *testing.T) {
		long := "/" + strings.Repeat("b", MaxRequestLine)
		if s := handled(t, one(t, ts.exchange(t, get(long)))); string(s.Target) != long {
			t.Errorf("OriginalTarget has %d bytes, want %d", len(s.Target), len(long))
		}
	})
}

func TestOneRequestPerConnection(t *testing.T) {
	ts := startServer(t, false)
	rs := responses(t, ts.exchange(t, get("/first%zz")+get("/second%zz")))
	if len(rs) != 1 {
		t.Fatalf("got %d responses, want 1", len(rs))
	}
	if s := handled(t, rs[0]); string(s.Target) != "/first%zz" {
		t.Errorf("OriginalTarget = %q", s.Target)
	}
	if n := ts.calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}
}

// With keep-alive left on by mistake, a later request on the connection must not be given the
// first request's target.
func TestLaterRequestOnKeptAliveConnectionFallsBack(t *testing.T) {
	ts := startServer(t, true)
	rs := responses(t, ts.exchange(t, get("/first%zz")+get("/second")+
		"GET /third HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	var got []string
	for _, r := range rs {
		got = append(got, string(handled(t, r).Target))
	}
	if want := []string{"/first%zz", "/second", "/third"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("targets %q, want %q", got, want)
	}
}

func TestIncompleteRequestLine(t *testing.T) {
	ts := startServer(t, false)
	t.Run("client closes", func(t *testing.T) {
		if raw := ts.exchange(t, "GET /resources/files/%zz HTT"); len(raw) != 0 {
			if resp := one(t, raw); resp.StatusCode == http.StatusOK {
				t.Errorf("incomplete request was served")
			}
		}
	})
	t.Run("read-header timeout", func(t *testing.T) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /resources/files/%zz")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("server did not close the connection after its read-header timeout: %v", err)
		}
	})
	if n := ts.calls.Load(); n != 0 {
		t.Errorf("handler called %d times, want 0", n)
	}
}

// pipeListener hands out one end of a net.Pipe.
type pipeListener struct {
	net.Listener
	conn net.Conn
}

func (l pipeListener) Accept() (net.Conn, error) { return l.conn, nil }

func TestConnContextRecognisesItsConnections(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c, err := NewListener(pipeListener{conn: server}).Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ConnContext(context.Background(), c).Value(connKey{}) != c {
		t.Error("ConnContext did not record the connection")
	}
}

func TestConnContextIgnoresForeignConnections(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	ctx := context.Background()
	if got := ConnContext(ctx, server); got != ctx {
		t.Error("ConnContext changed the context of a connection it did not wrap")
	}
	r, _ := http.NewRequest(http.MethodGet, "/x", nil)
	r.RequestURI = "/x%25zz"
	if got := OriginalTarget(r); got != "/x%25zz" {
		t.Errorf("OriginalTarget without a recorded target = %q, want RequestURI", got)
	}
}

func TestRepair(t *testing.T) {
	for in, want := range map[string]string{
		"/":              "/",
		"/a%41":          "/a%41",
		"/a%4":           "/a%254",
		"/a%":            "/a%25",
		"/%%":            "/%25%25",
		"/%4%41":         "/%254%41",
		"/a%zz?b%zz":     "/a%25zz?b%zz",
		"/a?%":           "/a?%",
		"/a%2?":          "/a%252?",
		"*":              "*",
		"http://h/a%zz":  "http://h/a%zz",
		"/%fF%Ff%e9%25x": "/%fF%Ff%e9%25x",
	} {
		if got := repair(in); got != want {
			t.Errorf("repair(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGrowStackAllocatesNothing: growStack's frame is on the stack, so a connection's first
// read costs no 4 KiB allocation, only the stack's growth it is there for.
func TestGrowStackAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { growStack(4096) }); n != 0 {
		t.Errorf("growStack allocates %v times per call, want 0", n)
	}
}
