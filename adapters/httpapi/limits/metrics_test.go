package limits

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveMetrics serves h as the service serves the metrics listener (MetricsOptions,
// ListenMetrics) on a loopback port and returns its address.
func serveMetrics(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	Harden(srv, MetricsOptions())
	capped := ListenMetrics(srv, ln)
	go func() { _ = srv.Serve(capped) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// get sends an HTTP/1.0 GET for path on a new connection and returns the answer's status line.
func get(t *testing.T, addr, path string, within time.Duration) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("GET %s: no answer within %v: %v", path, within, err)
	}
	status, _, _ := strings.Cut(string(raw), "\r\n")
	return status
}

// TestAMetricsConnectionWithoutARequestGivesItsSlotToANewOne pins ListenMetrics: with every
// slot held by half-sent requests, a new connection is served at once, and the slot it takes
// is the oldest holder's, which is closed.
func TestAMetricsConnectionWithoutARequestGivesItsSlotToANewOne(t *testing.T) {
	addr := serveMetrics(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	holders := make([]net.Conn, MetricsMaxConns)
	for i := range holders {
		holders[i] = dialFrom(t, "127.0.0.1", addr)
		if _, err := io.WriteString(holders[i], "GET /heal"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // accepted in this order
	}
	if status := get(t, addr, "/healthz", time.Second); status != "HTTP/1.0 200 OK" {
		t.Fatalf("a probe while every slot is held answered %q", status)
	}
	_ = holders[0].SetReadDeadline(time.Now().Add(time.Second))
	if n, err := holders[0].Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the oldest holder read %d bytes, %v; want it closed (EOF)", n, err)
	}
	_ = holders[MetricsMaxConns-1].SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := holders[MetricsMaxConns-1].Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("the newest holder: %v, want it still open", err)
	}
}

// TestMetricsConnectionsInTheHandlerAreNeverClosedForANewOne pins ListenMetrics's other half:
// a connection whose request is being answered keeps its slot; a new connection then waits
// for one to be given back.
func TestMetricsConnectionsInTheHandlerAreNeverClosedForANewOne(t *testing.T) {
	release := make(chan struct{})
	addr := serveMetrics(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	answers := make(chan string, MetricsMaxConns)
	for range MetricsMaxConns {
		go func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				answers <- err.Error()
				return
			}
			defer c.Close()
			_, _ = io.WriteString(c, "GET /slow HTTP/1.0\r\n\r\n")
			raw, _ := io.ReadAll(c)
			status, _, _ := strings.Cut(string(raw), "\r\n")
			answers <- status
		}()
	}
	time.Sleep(200 * time.Millisecond) // every slow request is in the handler
	probe := make(chan string, 1)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			probe <- err.Error()
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.0\r\n\r\n")
		raw, _ := io.ReadAll(c)
		status, _, _ := strings.Cut(string(raw), "\r\n")
		probe <- status
	}()
	select {
	case got := <-probe:
		t.Fatalf("a connection beyond the cap was answered %q while every slot was answering", got)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	for range MetricsMaxConns {
		if got := <-answers; got != "HTTP/1.0 200 OK" {
			t.Errorf("an answering connection got %q, want 200: it lost its slot", got)
		}
	}
	if got := <-probe; got != "HTTP/1.0 200 OK" {
		t.Errorf("the waiting connection got %q once slots were free", got)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
