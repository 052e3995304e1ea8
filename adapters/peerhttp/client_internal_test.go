package peerhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/refusal"
)

func TestNewClientUsesNoProxyAndNoCompression(t *testing.T) {
	roots := x509.NewCertPool()
	c := newClient(roots, 3*time.Second)
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport is %T", c.http.Transport)
	}
	if tr.Proxy != nil {
		t.Error("the transport consults a proxy; HTTP_PROXY must be ignored")
	}
	if !tr.DisableCompression || !tr.DisableKeepAlives || tr.ForceAttemptHTTP2 {
		t.Errorf("compression off %v, keep-alives off %v, HTTP/2 forced %v; want true, true, false",
			tr.DisableCompression, tr.DisableKeepAlives, tr.ForceAttemptHTTP2)
	}
	if tr.TLSClientConfig.RootCAs != roots || tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("the TLS config does not verify against the given roots")
	}
	if tr.TLSHandshakeTimeout != 3*time.Second || tr.MaxResponseHeaderBytes != maxSmallBody {
		t.Errorf("handshake timeout %v, header cap %d", tr.TLSHandshakeTimeout, tr.MaxResponseHeaderBytes)
	}
	if c.http.Timeout != 0 {
		t.Error("the client has an overall timeout; bounds belong to each request's context")
	}
	if err := c.http.CheckRedirect(nil, nil); err != http.ErrUseLastResponse {
		t.Errorf("CheckRedirect = %v, want http.ErrUseLastResponse", err)
	}
}

// countingReader is an endless source that counts what was read from it.
type countingReader struct{ n int }

func (r *countingReader) Read(b []byte) (int, error) {
	r.n += len(b)
	return len(b), nil
}

func TestReadSmallNeverReadsPastTheCap(t *testing.T) {
	src := &countingReader{}
	if data, err := readSmall(src); err != errTooBig || data != nil {
		t.Errorf("endless body: %d bytes, %v; want nothing and errTooBig", len(data), err)
	}
	if src.n > maxSmallBody+1 {
		t.Errorf("read %d bytes of an endless body, more than the cap plus one", src.n)
	}
	exact := strings.Repeat("x", maxSmallBody)
	if data, err := readSmall(strings.NewReader(exact)); err != nil || string(data) != exact {
		t.Errorf("body of exactly the cap: %d bytes, %v", len(data), err)
	}
}

func TestUnreachableNamesTheFailureWithoutTheErrorText(t *testing.T) {
	c := newClient(nil, 5*time.Second)
	wrap := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://peer:1/resources/peer/mh1.secret.tag", Err: err}
	}
	bounded, cancel := context.WithCancelCause(context.Background())
	cancel(deadline("Our own bound was hit."))
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"our own bound", bounded, wrap(context.Canceled), "Our own bound was hit."},
		{"caller cancelled", cancelled, wrap(context.Canceled), "cancelled"},
		{"certificate", context.Background(), wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), "does not verify"},
		{"dns", context.Background(), wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "peer"}}), "could not be resolved"},
		{"connect timeout", context.Background(), wrap(&net.OpError{Op: "dial", Err: timeoutErr{}}), "within 5s"},
		{"short body", context.Background(), io.ErrUnexpectedEOF, "ended before its content-length"},
		{"anything else", context.Background(), wrap(errors.New("connection reset by peer")), "connection to the peer failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.unreachable(tc.ctx, tc.err)
			if r.Code != refusal.PeerUnreachable || !strings.Contains(r.Message, tc.want) {
				t.Errorf("refusal = %v, want peer_unreachable containing %q", r, tc.want)
			}
			if strings.Contains(r.Message, "mh1.") || strings.Contains(r.Message, "peer:1") {
				t.Errorf("message %q holds the URL", r.Message)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
