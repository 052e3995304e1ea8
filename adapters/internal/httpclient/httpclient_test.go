package httpclient_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/internal/httpclient"
)

// seen is what the server learned about a request.
type seen struct {
	proto          int
	acceptEncoding string
	close          bool
}

// server is a TLS server (HTTP/2 offered) whose handler records each request and then runs
// answer.
func server(t *testing.T, answer http.HandlerFunc) (*httptest.Server, chan seen) {
	t.Helper()
	requests := make(chan seen, 4)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests <- seen{proto: r.ProtoMajor, acceptEncoding: r.Header.Get("Accept-Encoding"), close: r.Close}
		answer(w, r)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, requests
}

// rootsOf trusts s's certificate only.
func rootsOf(s *httptest.Server) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	return roots
}

func options(roots *x509.CertPool) httpclient.Options {
	return httpclient.Options{Connect: 2 * time.Second, Roots: roots, MaxHeaderBytes: 4 << 10}
}

func TestTheClientAsksForExactlyOneUncompressedHTTP1AnswerAndFollowsNoRedirect(t *testing.T) {
	s, requests := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, strings.Repeat("body ", 100))
	})
	// A proxy the environment names must never be consulted.
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	t.Setenv("HTTPS_PROXY", "http://"+proxy.Addr().String())
	t.Setenv("HTTP_PROXY", "http://"+proxy.Addr().String())
	c := httpclient.New(options(rootsOf(s)))
	for _, tc := range []struct {
		rule   string
		path   string
		status int
	}{
		{"a 200 is the answer", "/file", http.StatusOK},
		{"a redirect is the answer, not followed", "/moved", http.StatusFound},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			resp, err := c.Get(s.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			got := <-requests
			if got.proto != 1 || got.acceptEncoding != "" || !got.close {
				t.Errorf("request was HTTP/%d, Accept-Encoding %q, Connection: close %v; want HTTP/1, none, true",
					got.proto, got.acceptEncoding, got.close)
			}
			select {
			case more := <-requests:
				t.Errorf("a second request reached the server: %+v", more)
			default:
			}
		})
	}
}

func TestACertificateThatDoesNotVerifyFailsTheRequest(t *testing.T) {
	s, requests := server(t, func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		rule  string
		roots *x509.CertPool
	}{
		{"the system roots do not hold the test server's certificate", nil},
		{"roots that hold no certificate trust nothing", x509.NewCertPool()},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := httpclient.New(options(tc.roots)).Get(s.URL)
			var verify *tls.CertificateVerificationError
			if !errors.As(err, &verify) {
				t.Fatalf("Get = %v; want a certificate verification error", err)
			}
			if len(requests) != 0 {
				t.Error("the request reached a server whose certificate does not verify")
			}
		})
	}
}

func TestAResponseHeadAboveTheBoundFails(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("p", 8<<10))
	})
	if resp, err := httpclient.New(options(rootsOf(s))).Get(s.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a response head of more than 4 KiB was accepted")
	}
}

func TestAStalledAnswerFailsAfterTheIdleBoundAndAMovingOneDoesNot(t *testing.T) {
	const idle = 300 * time.Millisecond
	release := make(chan struct{})
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		for range 8 { // 8 × 100 ms: longer than idle in all, never idle for idle
			_, _ = io.WriteString(w, "tick ")
			w.(http.Flusher).Flush()
			time.Sleep(idle / 3)
		}
		if r.URL.Path == "/stall" {
			<-release
		}
	})
	defer close(release)
	o := options(rootsOf(s))
	o.Idle = idle
	c := httpclient.New(o)
	for _, tc := range []struct {
		rule    string
		path    string
		timeout bool
	}{
		{"a body that keeps moving is read whole", "/moving", false},
		{"a body that stops moving fails with a timeout", "/stall", true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			resp, err := c.Get(s.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			var timeout net.Error
			gotTimeout := errors.As(err, &timeout) && timeout.Timeout()
			if gotTimeout != tc.timeout || (!tc.timeout && (err != nil || len(body) != 8*len("tick "))) {
				t.Fatalf("read %d bytes, %v; want a timeout %v", len(body), err, tc.timeout)
			}
		})
	}
}
