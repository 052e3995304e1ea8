package limits

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
	"github.com/resplane/resplane/test/harness"
)

// TestListenTLSKeepsTheRawTargetBeneathTLS pins where TLS sits: between the connection caps and
// the raw-target listener, so a target net/http would refuse still reaches the handler as
// sent, one request per connection, and a handshake that never comes is bounded by the read
// header timeout.
func TestListenTLSKeepsTheRawTargetBeneathTLS(t *testing.T) {
	ca := harness.NewCA(t)
	certPEM, keyPEM := ca.Leaf(t, 1)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, rawtarget.OriginalTarget(r))
	})}
	Harden(srv, Options{ReadHeaderTimeout: 500 * time.Millisecond})
	go func() {
		_ = srv.Serve(ListenTLS(tcp, Caps{}, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}))
	}()
	t.Cleanup(func() { _ = srv.Close() })
	addr := tcp.Addr().String()

	r, err := harness.ExchangeTLS(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"},
		"GET /resources/files/%zz HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil || r.Status != http.StatusOK || string(r.Body) != "/resources/files/%zz" || r.Get("connection") != "close" {
		t.Fatalf("got %d %q %v; want 200 with the original target, and the connection closed", r.Status, r.Body, err)
	}

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(silent); err != nil {
		t.Fatalf("a connection that never starts its handshake was not closed: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("closed after %v, want about the 500 ms header timeout", d)
	}
}
