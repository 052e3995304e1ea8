package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Deadline is how long a request may take, from dialling to the server's close, unless a test
// names its own deadline: an answer not complete by then fails the test.
const Deadline = 10 * time.Second

// Response is a raw HTTP response.
type Response struct {
	Status int
	// Header holds the headers with lower-cased names, values in order of appearance.
	Header map[string][]string
	Body   []byte
	Raw    []byte
	// Head is set on the answer to a HEAD request, whose content-length describes no body.
	Head bool
}

// Get returns the first value of the named header (any case), or "".
func (r Response) Get(name string) string {
	if v := r.Header[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Has reports whether the named header is present.
func (r Response) Has(name string) bool { _, ok := r.Header[strings.ToLower(name)]; return ok }

// exchange sends request bytes exactly as given to addr and reads until the server closes,
// within deadline. The answer to a HEAD request is parsed as a head without a body; any other
// answer's body must match its content-length.
func exchange(addr, request string, deadline time.Duration) (Response, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return Response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(conn, request); err != nil {
		return Response{}, err
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		return Response{}, fmt.Errorf("no complete response within %v: %v (got %d bytes: %q)", deadline, err, len(raw), shortened(raw))
	}
	return parse(raw, strings.HasPrefix(request, "HEAD "))
}

// StallTolerance is how long a test gives a request that other clients' stalled connections
// must not hold back: a plane they could stall would hold it for their send timeouts (30 s
// and more), while on a machine busy with other tests it takes a few seconds at worst. The
// tests log the time it took.
const StallTolerance = 10 * time.Second

// shortened is raw up to its first 512 bytes, for an error message: a failed 10 MiB body is
// no help whole.
func shortened(raw []byte) []byte {
	const most = 512
	if len(raw) > most {
		return raw[:most]
	}
	return raw
}

// Raw is RawWithin the default Deadline.
func Raw(t testing.TB, addr, request string) Response {
	t.Helper()
	return RawWithin(t, addr, request, Deadline)
}

// RawWithin sends request bytes exactly as given to addr and reads until the server closes:
// a response not complete within deadline fails the test. The answer to a HEAD request is
// parsed as a head without a body; any other answer's body must match its content-length.
func RawWithin(t testing.TB, addr, request string, deadline time.Duration) Response {
	t.Helper()
	r, err := exchange(addr, request, deadline)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// RequestText is "<method> <target> HTTP/1.1" with a Host header for addr, the given extra
// header lines ("Name: value") and the blank line that ends the head.
func RequestText(addr, method, target string, headers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, addr)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// Request is RequestWithin the default Deadline.
func Request(t testing.TB, addr, method, target string, headers ...string) Response {
	t.Helper()
	return RequestWithin(t, addr, method, target, Deadline, headers...)
}

// RequestWithin sends RequestText(addr, method, target, headers...) and returns the response,
// which must be complete within deadline.
func RequestWithin(t testing.TB, addr, method, target string, deadline time.Duration, headers ...string) Response {
	t.Helper()
	return RawWithin(t, addr, RequestText(addr, method, target, headers...), deadline)
}

// Get sends a raw GET for target.
func Get(t testing.TB, addr, target string, headers ...string) Response {
	t.Helper()
	return Request(t, addr, http.MethodGet, target, headers...)
}

// Fetch is a raw GET for target that reports failures as errors instead of failing a test, so
// it may run off the test goroutine.
func Fetch(addr, target string, deadline time.Duration) (Response, error) {
	return exchange(addr, RequestText(addr, http.MethodGet, target), deadline)
}

// parse splits a raw HTTP/1.1 response into status, headers and body, and checks that the
// body's length matches content-length when one was sent. For the answer to a HEAD request
// (head) content-length describes a body that is not sent, so it is not checked, and Head is
// set.
func parse(raw []byte, head bool) (Response, error) {
	headPart, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		return Response{}, fmt.Errorf("no header/body separator in %q", raw)
	}
	lines := strings.Split(string(headPart), "\r\n")
	fields := strings.SplitN(lines[0], " ", 3)
	if len(fields) < 2 {
		return Response{}, fmt.Errorf("bad status line %q", lines[0])
	}
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		return Response{}, fmt.Errorf("bad status line %q", lines[0])
	}
	r := Response{Status: status, Header: map[string][]string{}, Body: body, Raw: raw, Head: head}
	for _, line := range lines[1:] {
		name, value, _ := strings.Cut(line, ":")
		key := strings.ToLower(strings.TrimSpace(name))
		r.Header[key] = append(r.Header[key], strings.TrimSpace(value))
	}
	if cl := r.Get("content-length"); !head && cl != "" && cl != strconv.Itoa(len(body)) {
		return Response{}, fmt.Errorf("content-length %s but %d body bytes", cl, len(body))
	}
	return r, nil
}

// RequireHeaders fails the test unless each named header appears exactly once, with the given
// value.
func RequireHeaders(t testing.TB, r Response, want map[string]string) {
	t.Helper()
	for name, value := range want {
		if got := r.Header[name]; !slices.Equal(got, []string{value}) {
			t.Errorf("%s = %q, want exactly [%q]", name, got, value)
		}
	}
}

// RequireNoPlaneHeaders fails the test when r carries any x-murmur-* header.
func RequireNoPlaneHeaders(t testing.TB, r Response) {
	t.Helper()
	for name := range r.Header {
		if strings.HasPrefix(name, "x-murmur-") {
			t.Errorf("unexpected plane header %s: %q", name, r.Header[name])
		}
	}
}

// errorBody is the only shape a refusal body may have.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// RequireRefusal asserts the parts every refusal under /resources/ shares, whatever the
// plane: status, content-type, content-length, connection: close, allow (exactly on 405), and
// a body that is exactly {"error":"<code>","message":"<text>"}, compact and not HTML-escaped,
// with a message that names no host path. It returns the message ("" for the answer to a
// HEAD request, which has no body).
func RequireRefusal(t testing.TB, r Response, status int, code string) string {
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
	if status == http.StatusMethodNotAllowed {
		if got := r.Header["allow"]; !slices.Equal(got, []string{"GET"}) {
			t.Errorf("allow %q, want exactly GET", got)
		}
	} else if r.Has("allow") {
		t.Errorf("allow header on a %d", status)
	}
	if r.Head {
		return ""
	}
	var body errorBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("body %q is not {\"error\",\"message\"}: %v", r.Body, err)
	}
	if want := Encode(body); string(r.Body) != want {
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
