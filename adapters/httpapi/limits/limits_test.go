package limits

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
)

type ctxKey struct{}

// serve starts a hardened server whose handler answers with the original target, and returns
// its address. The server also has a ConnContext hook of its own, which Harden must keep.
func serve(t *testing.T, opts Options, caps Caps) string {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Context().Value(ctxKey{}) != "kept" {
				http.Error(w, "earlier ConnContext hook lost", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, rawtarget.OriginalTarget(r))
		}),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, ctxKey{}, "kept")
		},
	}
	Harden(srv, opts)
	go func() { _ = srv.Serve(Listen(tcp, caps)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tcp.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// roundTrip sends raw on c and returns the status and body of the response.
func roundTrip(t *testing.T, c net.Conn, raw string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHardenSettings(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		srv := &http.Server{}
		Harden(srv, Options{})
		if srv.ReadHeaderTimeout != 10*time.Second || srv.WriteTimeout != 60*time.Second ||
			srv.ReadTimeout != 70*time.Second || srv.IdleTimeout != 10*time.Second {
			t.Errorf("timeouts: read header %v, write %v, read %v, idle %v",
				srv.ReadHeaderTimeout, srv.WriteTimeout, srv.ReadTimeout, srv.IdleTimeout)
		}
		if got := srv.MaxHeaderBytes + netHTTPHeaderSlack; got != 16<<10 {
			t.Errorf("effective header cap %d, want %d", got, 16<<10)
		}
		if srv.ConnContext == nil {
			t.Error("no ConnContext hook installed")
		}
	})
	t.Run("options", func(t *testing.T) {
		srv := &http.Server{}
		Harden(srv, Options{ReadHeaderTimeout: 2 * time.Second, WriteTimeout: 5 * time.Minute})
		if srv.ReadHeaderTimeout != 2*time.Second || srv.WriteTimeout != 5*time.Minute ||
			srv.ReadTimeout != 5*time.Minute+2*time.Second {
			t.Errorf("timeouts: read header %v, write %v, read %v",
				srv.ReadHeaderTimeout, srv.WriteTimeout, srv.ReadTimeout)
		}
	})
}

func TestHardenedServerServesRawTargetsOnePerConnection(t *testing.T) {
	addr := serve(t, Options{}, Caps{})
	c := dial(t, addr)
	status, body := roundTrip(t, c,
		"GET /resources/files/%zz HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n")
	if status != http.StatusOK || body != "/resources/files/%zz" {
		t.Fatalf("got %d %q, want 200 with the original target", status, body)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Errorf("after the first response: %q, %v; want the connection closed", rest, err)
	}
}

func TestHeaderBlockCap(t *testing.T) {
	addr := serve(t, Options{}, Caps{})
	// request returns a request whose line and header block are exactly n bytes.
	request := func(n int) string {
		head := "GET /x HTTP/1.1\r\nHost: x\r\nX-Pad: "
		const tail = "\r\n\r\n"
		return head + strings.Repeat("p", n-len(head)-len(tail)) + tail
	}
	if status, _ := roundTrip(t, dial(t, addr), request(MaxHeaderBlock)); status != http.StatusOK {
		t.Errorf("header block of %d bytes: status %d, want 200", MaxHeaderBlock, status)
	}
	if status, _ := roundTrip(t, dial(t, addr), request(MaxHeaderBlock+1)); status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("header block of %d bytes: status %d, want 431", MaxHeaderBlock+1, status)
	}
}

func TestReadHeaderTimeoutClosesTheConnection(t *testing.T) {
	addr := serve(t, Options{ReadHeaderTimeout: 200 * time.Millisecond}, Caps{})
	c := dial(t, addr)
	_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n")
	start := time.Now()
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("connection not closed: %v", err)
	}
	if len(rest) != 0 {
		t.Errorf("got a response %q, want the connection closed without one", rest)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("closed after %v", elapsed)
	}
}

func TestListenCapsOpenConnections(t *testing.T) {
	addr := serve(t, Options{}, Caps{Total: 2, PerAddress: 2})
	// Two connections that have not finished their header hold both slots.
	first, second := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{first, second} {
		_, _ = io.WriteString(c, "GET /held HTTP/1.1\r\n")
	}
	time.Sleep(100 * time.Millisecond)

	third := dial(t, addr)
	_, _ = io.WriteString(third, "GET /third HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("third connection was served while the cap was reached (read error %v)", err)
	}

	_ = first.Close()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("third connection not served after a slot was freed: %v", err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "/third" {
		t.Errorf("third connection: body %q", body)
	}
}

func TestEveryResponseSaysConnectionCloseWhateverTheVersion(t *testing.T) {
	addr := serve(t, Options{}, Caps{})
	for _, request := range []string{
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a HTTP/1.0\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c := dial(t, addr)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "\r\nConnection: close\r\n") || strings.Count(string(raw), "HTTP/1.") != 1 {
			t.Errorf("%q answered %q; want one response carrying Connection: close", request, raw)
		}
	}
}

func TestOptionsStarReachesTheHandler(t *testing.T) {
	addr := serve(t, Options{}, Caps{})
	status, body := roundTrip(t, dial(t, addr), "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
	if status != http.StatusOK || body != "*" {
		t.Fatalf("OPTIONS * = %d %q; want the handler's own answer", status, body)
	}
}
