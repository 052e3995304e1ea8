package peerhttp_test

import (
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/refusal"
)

// serve starts a plain HTTP server for the test and returns it with its address as a peer.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, destination.Peer) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, peerOf(t, srv.URL)
}

// serveTLS starts an HTTPS server and returns it, its address as a peer and a pool that
// trusts its certificate.
func serveTLS(t *testing.T, h http.HandlerFunc) (*httptest.Server, destination.Peer, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the tests make fail on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, peerOf(t, srv.URL), roots
}

// peerOf parses s with the real peer parser, so the tests send what the tools would.
func peerOf(t *testing.T, s string) destination.Peer {
	t.Helper()
	p, err := destination.ParsePeer(s)
	if err != nil {
		t.Fatalf("ParsePeer(%q): %v", s, err)
	}
	return p
}

// closedPort returns the address of a TCP port nothing listens on.
func closedPort(t *testing.T) destination.Peer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return peerOf(t, "http://"+addr)
}

// silentListener accepts TCP connections and never writes a byte: a peer that hangs in the
// TLS handshake.
func silentListener(t *testing.T) destination.Peer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return peerOf(t, "https://"+l.Addr().String())
}

// wantRefusal fails unless err is a refusal with code whose message contains every part.
func wantRefusal(t *testing.T, err error, code refusal.Code, parts ...string) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok {
		t.Fatalf("error = %v, want a %s refusal", err, code)
	}
	if r.Code != code {
		t.Fatalf("code = %s (%s), want %s", r.Code, r.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(r.Message, p) {
			t.Errorf("message %q does not contain %q", r.Message, p)
		}
	}
}

// hang blocks a handler until the client goes away (or, should a test go wrong, ten seconds
// pass, so the server can still shut down).
func hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}
