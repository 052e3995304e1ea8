package peerhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/resplane/resplane/adapters/internal/httpclient"
	"github.com/resplane/resplane/domain/refusal"
)

// maxSmallBody bounds what is read of an agent card or of a non-200 redeem answer, and the
// response header block of either.
const maxSmallBody = 64 << 10

// LoadRoots returns the certificate roots for https peers: the system roots plus every
// certificate in the PEM file at path (--peer-ca). When the system roots cannot be loaded, the
// file's certificates alone are trusted. A path of "" names no file: the result is nil, which
// CardOptions and RedeemOptions take as the system roots alone. A file that cannot be read or
// holds no PEM certificate is an error naming the path; it is meant for the operator at
// startup.
func LoadRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the peer CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("the peer CA file %s holds no PEM certificate", path)
	}
	return roots, nil
}

// client is the HTTP client both peer requests go through.
type client struct {
	http    *http.Client
	connect time.Duration
}

// newClient returns a client that verifies https peers against roots (nil: the system roots)
// and gives up on a connection (TCP and TLS handshake each) after connect; the rest of its
// hardening (no redirect, no proxy, no compression, HTTP/1.1, one connection per request) is
// adapters/internal/httpclient's. It sets no overall deadline: callers bound a request through
// its context.
func newClient(roots *x509.CertPool, connect time.Duration) *client {
	return &client{
		http:    httpclient.New(httpclient.Options{Connect: connect, Roots: roots, MaxHeaderBytes: maxSmallBody}),
		connect: connect,
	}
}

// get sends GET url with the given headers under ctx. The error is already a peer_unreachable
// refusal that holds neither the URL nor any text of the underlying error.
func (c *client) get(ctx context.Context, url string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, refusal.WithMessage(refusal.PeerUnreachable, "The peer's address does not form a request URL.")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	return resp, nil
}

// deadline is a context cancellation cause that is itself the sentence to report, so a request
// cut short by one of our own timers says which bound it hit.
type deadline string

func (d deadline) Error() string { return string(d) }

// unreachable turns a failure of a request made under ctx into a peer_unreachable refusal with
// a sentence naming the kind of failure. It never uses err's text: a *url.Error holds the URL.
func (c *client) unreachable(ctx context.Context, err error) *refusal.Refusal {
	var (
		bound    deadline
		verify   *tls.CertificateVerificationError
		dns      *net.DNSError
		timeout  net.Error
		sentence string
	)
	switch {
	case errors.As(context.Cause(ctx), &bound):
		sentence = string(bound)
	case ctx.Err() != nil:
		sentence = "The request to the peer was cancelled before it completed."
	case errors.As(err, &verify):
		sentence = "The peer's TLS certificate does not verify against the trusted roots."
	case errors.As(err, &dns):
		sentence = "The peer's host name could not be resolved."
	case errors.As(err, &timeout) && timeout.Timeout():
		sentence = "The peer did not complete a connection within " + c.connect.String() + "."
	case errors.Is(err, io.ErrUnexpectedEOF):
		sentence = "The peer's answer ended before its content-length."
	default:
		sentence = "The connection to the peer failed before a complete answer arrived."
	}
	return refusal.WithMessage(refusal.PeerUnreachable, sentence)
}

// errTooBig reports a body longer than maxSmallBody.
var errTooBig = errors.New("the body is larger than 64 KiB")

// readSmall reads all of r when it holds at most maxSmallBody bytes, and fails with errTooBig
// after reading one byte more when it holds more.
func readSmall(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSmallBody+1))
	if err == nil && len(data) > maxSmallBody {
		return nil, errTooBig
	}
	return data, err
}

// jsonObject parses data as one JSON object; ok is false for anything else (null included).
func jsonObject(data []byte) (obj map[string]json.RawMessage, ok bool) {
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// stringField returns obj[key] when it is a JSON string, else "".
func stringField(obj map[string]json.RawMessage, key string) string {
	var s string
	if err := json.Unmarshal(obj[key], &s); err != nil {
		return ""
	}
	return s
}
