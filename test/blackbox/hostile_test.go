package blackbox_test

// Hostile clients (docs/operator-guide.md, "Threat model"): a request that holds its body back,
// a target or header built to swell the trace and the log, a full disk under the trace, a page
// that rebinds a name to the listener, and a token hidden by percent-encoding.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbHostileCapsule declares both planes over a small workdir.
var bbHostileCapsule = harness.Capsule{
	Manifest: bbFilesManifest("out/", "") + "  peer_files:\n    root: out/\n",
	Files:    fixture.Layout{"out/report.md": "# report\n"},
}

// bbAnswerClosed sends head on a new connection to addr (then, when trickle is set, one body
// chunk every 200 ms for as long as the connection takes them), reads until the server closes,
// and returns the response and how long the connection stayed open after the answer was
// complete. The read gives up after 10 s.
func bbAnswerClosed(t *testing.T, addr, head string, trickle bool) (harness.Response, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if trickle {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := io.WriteString(conn, "1\r\nx\r\n"); err != nil {
					return
				}
			}
		}()
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var raw []byte
	var answered time.Time
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		raw = append(raw, buf[:n]...)
		if answered.IsZero() && bbComplete(raw) {
			answered = time.Now()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the server did not close the connection: %v (after %q)", err, raw)
		}
	}
	if answered.IsZero() {
		t.Fatalf("no complete answer before the close: %q", raw)
	}
	return bbParse(t, raw), time.Since(answered)
}

var bbContentLength = regexp.MustCompile(`(?i)\r\ncontent-length: *([0-9]+)\r\n`)

// bbComplete reports whether raw holds a whole response head and the body its
// content-length announces.
func bbComplete(raw []byte) bool {
	head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		return false
	}
	m := bbContentLength.FindSubmatch(append(head, "\r\n"...))
	if m == nil {
		return false
	}
	n, _ := strconv.Atoi(string(m[1]))
	return len(body) >= n
}

// bbParse parses a raw response into the harness's shape, header names lowercased.
func bbParse(t *testing.T, raw []byte) harness.Response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%v: %q", err, raw)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := harness.Response{Status: resp.StatusCode, Header: map[string][]string{}, Body: body, Raw: raw}
	for name, values := range resp.Header {
		r.Header[strings.ToLower(name)] = values
	}
	if resp.Close { // ReadResponse takes "Connection: close" out of the header into Close
		r.Header["connection"] = []string{"close"}
	}
	return r
}

// TestARequestBodyIsRefusedAndItsConnectionClosedRightAfterTheAnswer pins docs/http-api.md,
// "Request bodies": neither plane takes a body; a GET that declares one is refused
// body_not_allowed (traced on a plane route), the method rule still comes first, and however
// the client holds its body back, the connection is closed within 2 s of the answer.
func TestARequestBodyIsRefusedAndItsConnectionClosedRightAfterTheAnswer(t *testing.T) {
	p := harness.Start(t, bbHostileCapsule)
	s := bbSessionOf(t, p.Ready)
	host := "Host: " + s.addr + "\r\n"
	for _, tc := range []struct {
		name    string
		head    string
		trickle bool
		status  int
		code    string
		traced  string // the traced read path, "" when untraced
	}{
		{"a GET with an unsent Content-Length body", "GET /resources/files/report.md HTTP/1.1\r\n" + host + "Content-Length: 200000\r\n\r\n", false, 400, "body_not_allowed", "report.md"},
		{"a GET with a chunked body trickled", "GET /resources/files/report.md HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n", true, 400, "body_not_allowed", "report.md"},
		{"a GET with a body on an unknown route", "GET /resources/zzz HTTP/1.1\r\n" + host + "Content-Length: 200000\r\n\r\n", false, 400, "body_not_allowed", ""},
		{"a POST with an unsent body is still 405", "POST /resources/files/report.md HTTP/1.1\r\n" + host + "Content-Length: 200000\r\n\r\n", false, 405, "method_not_allowed", "report.md"},
		{"a GET waiting for 100-continue", "GET /resources/files/report.md HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nContent-Length: 200000\r\n\r\n", false, 400, "body_not_allowed", "report.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := len(harness.TraceLines(t, s.trace))
			r, open := bbAnswerClosed(t, s.addr, tc.head, tc.trickle)
			t.Logf("the connection closed %v after the answer", open.Round(time.Millisecond))
			if open > 2*time.Second {
				t.Errorf("the connection stayed open %v after the answer; want at most 2 s", open)
			}
			if tc.traced == "" {
				harness.RequireRefusal(t, r, tc.status, tc.code)
				harness.RequireNoPlaneHeaders(t, r)
				return
			}
			msg := bbFilesRefusal(t, r, tc.status, tc.code, 0)
			lines := harness.TraceFrom(t, s.trace, mark, 1)
			bbCheckRead(t, s, lines[0], bbReadEvent{path: tc.traced, bbOutcome: tc.code, reason: msg})
		})
	}
	t.Run("a GET with an empty body is served", func(t *testing.T) {
		r := harness.Raw(t, s.addr, "GET /resources/files/report.md HTTP/1.1\r\n"+host+"Content-Length: 0\r\n\r\n")
		bbServed(t, r, []byte("# report\n"), 0, "advisory", "out/")
	})
}

// bbTraceGrowth runs request and returns how many bytes it added to the trace at path, after
// waiting for its one line.
func bbTraceGrowth(t *testing.T, path string, request func()) int64 {
	t.Helper()
	mark := len(harness.TraceLines(t, path))
	before := bbSize(t, path)
	request()
	harness.TraceFrom(t, path, mark, 1)
	return bbSize(t, path) - before
}

func bbSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// TestNoRequestAddsMoreThanAKilobyteToTheTraceOrTheLog pins docs/trace.md, "Long fields",
// and docs/http-api.md, "Refusals": a read path longer than any servable path is refused
// target_too_long and traced with its path capped; every other traced or logged string a
// request controls is capped too, so one request adds at most about 1 KB to the trace and
// writes an access-log line of about 1 KB, whatever it sends.
func TestNoRequestAddsMoreThanAKilobyteToTheTraceOrTheLog(t *testing.T) {
	p := harness.Start(t, bbHostileCapsule)
	s := bbSessionOf(t, p.Ready)
	marker := regexp.MustCompile(`…\[truncated from ([0-9]+) bytes\]$`)

	t.Run("a 12 KB path is refused target_too_long and traced capped", func(t *testing.T) {
		var r harness.Response
		grew := bbTraceGrowth(t, s.trace, func() { r = harness.Get(t, s.addr, "/resources/files/"+strings.Repeat("a", 12000)) })
		t.Logf("a 12 KB target added %d bytes to the trace", grew)
		msg := bbFilesRefusal(t, r, 414, "target_too_long", 0)
		if grew > 1024 {
			t.Errorf("the request added %d bytes to the trace; want at most 1 KB", grew)
		}
		line := harness.TraceLines(t, s.trace)
		event := harness.ParseEvent(t, line[len(line)-1])
		path := event.Str(t, "path")
		if m := marker.FindStringSubmatch(path); m == nil || m[1] != "12000" || !strings.HasPrefix(path, "aaaa") {
			t.Errorf("traced path %q; want its start and the marker stating 12000 bytes", path)
		}
		bbCheckRead(t, s, line[len(line)-1], bbReadEvent{path: path, bbOutcome: "target_too_long", reason: msg})
	})
	t.Run("a path of exactly 4096 bytes is looked up", func(t *testing.T) {
		if r := harness.Get(t, s.addr, "/resources/files/"+strings.Repeat("d/", 2048)); r.Status == 414 || r.Status == 200 {
			t.Errorf("answered %d; want the path looked up and refused by the filesystem", r.Status)
		}
	})
	t.Run("a 12 KB target of control escapes adds at most 1 KB", func(t *testing.T) {
		var r harness.Response
		grew := bbTraceGrowth(t, s.trace, func() { r = harness.Get(t, s.addr, "/resources/files/"+strings.Repeat("%01", 4000)) })
		t.Logf("a 12 KB target of %%01 escapes added %d bytes to the trace", grew)
		if r.Status == 200 || grew > 1024 {
			t.Errorf("answered %d and added %d bytes to the trace; want a refusal and at most 1 KB", r.Status, grew)
		}
	})
	t.Run("a 12 KB audience adds at most 1 KB", func(t *testing.T) {
		var r harness.Response
		token := harness.ForgeToken(`{"v":1}`)
		grew := bbTraceGrowth(t, s.trace, func() {
			r = harness.Get(t, s.addr, "/resources/peer/"+token, "x-murmur-audience: "+strings.Repeat("b", 12000))
		})
		t.Logf("a 12 KB x-murmur-audience added %d bytes to the trace", grew)
		harness.RequireRefusal(t, r, 403, "handle_not_valid")
		if grew > 1024 {
			t.Errorf("the request added %d bytes to the trace; want at most 1 KB", grew)
		}
		line := harness.TraceLines(t, s.trace)
		audience := harness.ParseEvent(t, line[len(line)-1]).Str(t, "audience_asserted")
		if m := marker.FindStringSubmatch(audience); m == nil || m[1] != "12000" {
			t.Errorf("traced audience %q; want the marker stating 12000 bytes", audience)
		}
	})
	t.Run("a 3 KB method is refused 405 and logged capped", func(t *testing.T) {
		r := harness.Request(t, s.addr, strings.Repeat("M", 3000), "/resources/files/report.md")
		bbFilesRefusal(t, r, 405, "method_not_allowed", 0)
	})
	t.Run("every access-log line stays about 1 KB", func(t *testing.T) {
		var longest int
		var requests int
		for _, line := range strings.Split(bbStderrWith(p, `"message":"request"`, 5), "\n") {
			if strings.Contains(line, `"message":"request"`) {
				requests++
				longest = max(longest, len(line))
			}
		}
		t.Logf("the longest of %d access-log lines is %d bytes", requests, longest)
		if requests < 5 || longest > 1100 {
			t.Errorf("%d access-log lines, the longest %d bytes; want every request logged in about 1 KB:\n%s", requests, longest, p.Stderr())
		}
	})
}

// bbStderrWith returns p's stderr once it holds n lines containing text, or after 5 s: the
// process's stderr reaches the test through a pipe, a moment after the response.
func bbStderrWith(p *harness.Process, text string, n int) string {
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(p.Stderr(), text) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return p.Stderr()
}

// TestAFullDiskCostsOneWarningAMinuteNeverARequest pins docs/trace.md, "Write guarantees":
// when the trace's disk is full (/dev/full fails every write with ENOSPC) every request is
// still answered, and the dropped lines cost one warning line, then at most one a minute,
// counting what was dropped; the last count is logged at shutdown.
func TestAFullDiskCostsOneWarningAMinuteNeverARequest(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": "A"},
		Args: []string{"--trace", "/dev/full"}})
	const reads = 50
	for range reads {
		bbServed(t, harness.Get(t, p.Ready.Listen, "/resources/files/a.txt"), []byte("A"), 0, "advisory", "out/")
	}
	if got := bbDropReports(t, p.Stderr()); len(got) != 1 || got[0] != 1 {
		t.Errorf("%d reads on a full disk logged drop reports %v; want one warning for the first line", reads, got)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	got := bbDropReports(t, p.Stderr())
	if len(got) != 2 || got[0]+got[1] != 1+reads+1 {
		t.Errorf("drop reports %v; want two warnings counting session_start, %d reads and session_end", got, reads)
	}
	if strings.Contains(p.Stderr(), "a trace line could not be written") {
		t.Errorf("a write failure was logged line by line:\n%s", p.Stderr())
	}
}

// bbDropReports returns the dropped counts of the warnings stderr holds about trace lines
// that could not be written.
func bbDropReports(t *testing.T, stderr string) []int {
	t.Helper()
	var counts []int
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "trace lines could not be written") {
			continue
		}
		var entry struct {
			Level   string `json:"level"`
			Dropped int    `json:"dropped"`
			Cause   string `json:"cause"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if entry.Level != "warn" || !strings.Contains(entry.Cause, "no space left on device") {
			t.Errorf("a full disk was logged as %s", line)
		}
		counts = append(counts, entry.Dropped)
	}
	return counts
}

// TestAHostNotAllowedIsRefused421BeforeAnythingElse pins docs/http-api.md, "Host names": a
// request whose Host is not an IP literal, localhost, the advertise URL's host or an
// --allowed-hosts name is refused 421 host_not_allowed on every route under /resources/
// (before the method and the body, traced on a plane route) and gets the bare 404 on the
// agent card, so a page that rebinds its own name to the listener reads nothing.
func TestAHostNotAllowedIsRefused421BeforeAnythingElse(t *testing.T) {
	c := bbHostileCapsule
	c.Args = []string{"--allowed-hosts", "Capsule.Example", "--advertise-url", "http://Reporter.Internal:41234"}
	p := harness.Start(t, c)
	s := bbSessionOf(t, p.Ready)
	const rebound = "Host: rebound.example:" + "80"

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, request string
			traced        string // "list", a read path, "redeem", or "" when untraced
		}{
			{"a read", "GET /resources/files/report.md HTTP/1.1\r\n" + rebound + "\r\n\r\n", "report.md"},
			{"a listing", "GET /resources/files HTTP/1.1\r\n" + rebound + "\r\n\r\n", "list"},
			{"another method, with a body", "POST /resources/files/report.md HTTP/1.1\r\n" + rebound + "\r\nContent-Length: 3\r\n\r\nabc", "report.md"},
			{"a redeem", "GET /resources/peer/" + harness.ForgeToken(`{"v":1}`) + " HTTP/1.1\r\n" + rebound + "\r\nx-murmur-audience: a@b:1\r\n\r\n", "redeem"},
			{"an unknown route", "GET /resources/zzz HTTP/1.1\r\n" + rebound + "\r\n\r\n", ""},
			{"the peer route without a token", "GET /resources/peer/ HTTP/1.1\r\n" + rebound + "\r\n\r\n", ""},
			{"a name that only ends like an allowed one", "GET /resources/files HTTP/1.1\r\nHost: x.capsule.example\r\n\r\n", "list"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.traced == "" {
					bbUntraced(t, s, func() {
						r := harness.Raw(t, s.addr, tc.request)
						harness.RequireRefusal(t, r, 421, "host_not_allowed")
						harness.RequireNoPlaneHeaders(t, r)
					})
					return
				}
				mark := len(harness.TraceLines(t, s.trace))
				r := harness.Raw(t, s.addr, tc.request)
				msg := harness.RequireRefusal(t, r, 421, "host_not_allowed")
				line := harness.TraceFrom(t, s.trace, mark, 1)[0]
				switch tc.traced {
				case "list":
					bbCheckList(t, s, line, bbListEvent{bbOutcome: "host_not_allowed", reason: msg})
				case "redeem":
					if e := harness.ParseEvent(t, line); e.M["event_type"] != "peer_handle_redeem" || e.M["outcome"] != "host_not_allowed" {
						t.Errorf("traced %s; want a peer_handle_redeem with outcome host_not_allowed", line)
					}
				default:
					bbCheckRead(t, s, line, bbReadEvent{path: tc.traced, bbOutcome: "host_not_allowed", reason: msg})
				}
			})
		}
		t.Run("the agent card", func(t *testing.T) {
			bbBare404(t, harness.Raw(t, s.addr, "GET /.well-known/agent-card.json HTTP/1.1\r\n"+rebound+"\r\n\r\n"))
		})
	})
	t.Run("accepted", func(t *testing.T) {
		for _, host := range []string{s.addr, "127.0.0.1", "[::1]:41234", "localhost", "LOCALHOST:9", "capsule.example", "CAPSULE.EXAMPLE:443", "reporter.internal:41234"} {
			t.Run(host, func(t *testing.T) {
				r := harness.Raw(t, s.addr, "GET /resources/files/report.md HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
				bbServed(t, r, []byte("# report\n"), 0, "advisory", "out/")
				if card := harness.Raw(t, s.addr, "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); card.Status != 200 {
					t.Errorf("the card answered %d", card.Status)
				}
			})
		}
		t.Run("HTTP/1.0 without a Host", func(t *testing.T) {
			bbServed(t, harness.Raw(t, s.addr, "GET /resources/files/report.md HTTP/1.0\r\n\r\n"), []byte("# report\n"), 0, "advisory", "out/")
		})
	})
}

// TestAPercentEncodedTokenNeverReachesTheAccessLog pins docs/operator-guide.md, "Logs": a
// token hidden by percent-encoding in a target outside the peer route is logged as
// <handle:id>, like a literal one.
func TestAPercentEncodedTokenNeverReachesTheAccessLog(t *testing.T) {
	p := harness.Start(t, bbHostileCapsule)
	token := harness.ForgeToken(`{"v":1,"p":"report.md"}`)
	payload, tag, _ := strings.Cut(strings.TrimPrefix(token, "mh1."), ".")
	encoded := "mh1%2E" + payload + "%2e" + tag
	for _, target := range []string{
		"/resources/files/" + encoded,
		"/resources/files/x?h=" + encoded,
		"/resources/peerless/" + encoded,
		"/resources/files/m%68%31.%" + fmt.Sprintf("%02X", payload[0]) + payload[1:] + "." + tag,
	} {
		harness.Get(t, p.Ready.Listen, target)
	}
	stderr := bbStderrWith(p, `"message":"request"`, 4)
	if strings.Contains(stderr, tag) || strings.Contains(stderr, payload[1:]) {
		t.Errorf("the access log holds the token:\n%s", stderr)
	}
	if n := strings.Count(stderr, "<handle:"); n < 4 {
		t.Errorf("%d placeholders in the access log; want one per request:\n%s", n, stderr)
	}
}

// TestATokenWrappedInAnotherMh1RunIsRedactedWhole pins docs/trace.md, "Redaction": a token
// inside a longer mh1. run (mh1.x.<token>, a token with a third segment, a nested prefix) is
// replaced with the whole run, so neither its payload nor its tag reaches the trace or the
// access log.
func TestATokenWrappedInAnotherMh1RunIsRedactedWhole(t *testing.T) {
	p := harness.Start(t, bbHostileCapsule)
	token := harness.ForgeToken(`{"v":1,"p":"report.md"}`)
	payload, tag, _ := strings.Cut(strings.TrimPrefix(token, "mh1."), ".")
	targets := []string{
		"/resources/files/mh1.x." + token,
		"/resources/files/" + token + ".md",
		"/resources/files/mh1." + token,
		"/resources/files/dir/mh1.x." + token + "/y",
		"/resources/files/a?h=mh1.x." + token,
		"/resources/peer/mh1.x." + token,
	}
	for _, target := range targets {
		harness.Get(t, p.Ready.Listen, target)
	}
	stderr := bbStderrWith(p, `"message":"request"`, len(targets))
	trace, err := os.ReadFile(p.Ready.Trace)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"the access log": stderr, "the trace": string(trace)} {
		if strings.Contains(text, tag) || strings.Contains(text, payload) {
			t.Errorf("%s holds part of the token:\n%s", name, text)
		}
	}
	if n := strings.Count(stderr, "<handle:"); n < len(targets) {
		t.Errorf("%d placeholders in the access log; want one per request:\n%s", n, stderr)
	}
}
