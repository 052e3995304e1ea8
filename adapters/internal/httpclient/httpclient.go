// Package httpclient builds the one hardened HTTP client resplane uses towards another
// party: a peer capsule (adapters/peerhttp) or, for the operator's client, a running service
// (adapters/operatorhttp). Each of those says which bounds it picks; the client they get
// guarantees the rest:
//
//   - Redirects are never followed: a 3xx comes back as the answer.
//   - HTTP_PROXY, HTTPS_PROXY and NO_PROXY are ignored: the request goes to the host and
//     port asked for, which is what an allow-list or the operator decided on, and nothing on
//     its request line (a handle, a path) is handed to a third party.
//   - Compression is never requested, so a body is exactly the bytes sent and content-length
//     means what it says.
//   - Only HTTP/1.1 is spoken, one connection per request (keep-alives off), so no request
//     waits behind another or reuses a connection a previous answer left in an unknown state.
//   - https servers must present a certificate that verifies against the roots given (the
//     system roots by default), with TLS 1.2 or later.
//   - The TCP connect and, separately, the TLS handshake are bounded; the response head is
//     bounded in bytes. With an idle bound, every read and every write on the connection must
//     make progress within it, however long a busy body takes.
//
// What it does not guarantee: there is no overall deadline. A request that must end by a
// given time is bounded through its context, by the caller.
package httpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"time"
)

// Options are the bounds one kind of request needs.
type Options struct {
	// Connect bounds the TCP connect and, separately, the TLS handshake. It must be positive.
	Connect time.Duration
	// Idle, when positive, bounds every read and every write on the connection: an answer
	// that makes no progress for this long fails with a timeout. Zero leaves progress to the
	// caller.
	Idle time.Duration
	// Roots verifies https servers; nil means the system roots.
	Roots *x509.CertPool
	// MaxHeaderBytes bounds the response's header block. It must be positive.
	MaxHeaderBytes int64
}

// New returns a client with the package's guarantees and o's bounds.
func New(o Options) *http.Client {
	dialer := &net.Dialer{Timeout: o.Connect}
	dial := dialer.DialContext
	if o.Idle > 0 {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: conn, idle: o.Idle}, nil
		}
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dial,
			TLSClientConfig:        &tls.Config{RootCAs: o.Roots, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    o.Connect,
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: o.MaxHeaderBytes,
			Protocols:              protocols,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// idleConn gives every read and every write the idle bound as its deadline, so that a server
// that stops sending (or receiving) is abandoned, however long a busy body takes.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
